#pragma once

#include <array>
#include <filesystem>
#include <string_view>

#include "strata/tensor/tensor.h"

namespace strata::data {

/// Reads an IDX file of unsigned bytes (the MNIST format: magic 0x00 0x00 0x08 <ndim>, ndim big-endian u32 sizes,
/// then the data), gzip-compressed or plain, into a u8 CPU tensor of the file's shape. A wrong magic number, element
/// type or size, a truncated file or trailing bytes throw IOError naming the file and what was expected and found.
Tensor read_idx(const std::filesystem::path& path);

/// Where Debian's dataset-fashion-mnist package installs the four files.
inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

enum class Split { Train, Test };

}  // namespace strata::data
