#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "strata/tensor/tensor.h"

namespace strata::io {

// Note [The safetensors format]
// A file is: 8 bytes, the little-endian length N of the header; N bytes of JSON, an object mapping each tensor's
// name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} plus an optional "__metadata__" object of
// strings; then the byte buffer, in which each tensor occupies [begin, end), contiguous, little-endian. The ranges
// tile the buffer exactly: no overlaps, no holes, nothing after the last one. We write what the reference
// implementation (huggingface/safetensors) writes: compact JSON, "__metadata__" first, tensors ordered by dtype
// (widest first, which keeps every tensor aligned to its element size) then by name, the header padded with spaces
// to a multiple of 8 bytes.

/// Tensors by name, in name order.
using TensorMap = std::map<std::string, Tensor>;
/// Free-form string metadata (the file's "__metadata__").
using Metadata = std::map<std::string, std::string>;

struct SafetensorsContent {
  TensorMap tensors;
  Metadata metadata;
};

/// Writes `tensors` (any device, any layout: they are read to the host, contiguous) and `metadata` to `path`
/// atomically: the bytes go to a new file (io::AtomicFile), which is flushed to disk and renamed over `path`, so a
/// failure at any point leaves the previous file as it was, and a killed save leaves no temporary file for good
/// (Note [Saves leave nothing behind]). Only a regular file or a new path is written (never a device, a FIFO...).
/// Throws IOError naming the file and the problem; InvalidArgumentError, before the file is touched, for a header
/// larger than load_safetensors accepts (100 MB, mostly metadata) or a name or string that is not UTF-8.
void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors, const Metadata& metadata = {});

/// The bytes of the file save_safetensors would write, for a file object or a socket; `name` names it in errors.
std::string save_safetensors_bytes(const TensorMap& tensors, const Metadata& metadata = {},
                                   std::string_view name = "<bytes>");

/// Reads a safetensors file, validating the whole header before trusting any of it, and places the tensors on
/// `device`. Any malformed or hostile content throws IOError naming the file, the tensor and the problem; a file of
/// another known format (torch.save's zip or pickle, NumPy's .npy...) is named as such.
SafetensorsContent load_safetensors(const std::filesystem::path& path, Device device = kCPU);

/// load_safetensors of a file's bytes held in memory; `name` names them in errors.
SafetensorsContent load_safetensors_bytes(std::string_view data, Device device = kCPU,
                                          std::string_view name = "<bytes>");

/// The dtype's name in safetensors headers: "F32", "BF16", "I64", "BOOL"...
std::string_view safetensors_dtype_name(DType dtype);

namespace detail {
/// Test hook: called with each tensor's name just before its bytes are written (nullptr: none). Lets tests make a
/// save fail midway. Not thread-safe; tests only.
void set_save_hook(std::function<void(const std::string& name)> hook);
}  // namespace detail

}  // namespace strata::io
