#pragma once

// The JSON header of a safetensors file (Note [The safetensors format] in safetensors.h): written from tensors, and
// read back with every check the format asks for. Both take time linear in the number of tensors.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/io/safetensors.h"

namespace strata::io::detail {

/// The most header bytes a file may declare (the reference implementation's limit); save refuses to write more.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

/// One tensor's entry, as read from a header.
struct HeaderEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

struct Header {
  std::vector<HeaderEntry> entries;  // by data_offsets, tiling the data exactly
  Metadata metadata;
};

/// The dtype's name in headers ("F32", "BOOL"...).
std::string_view dtype_name(DType dtype);

/// The tensors in the order they are written: widest dtype first, then by name, which keeps every tensor aligned
/// to its element size. Throws InvalidArgumentError (naming `file`) for an undefined tensor or the reserved name.
std::vector<std::pair<const std::string*, const Tensor*>> write_order(const TensorMap& tensors, std::string_view file);

/// The header for tensors in `order`, compact JSON padded with spaces to a multiple of 8 bytes. Throws
/// InvalidArgumentError naming `file` when a name or metadata string is not UTF-8, or when the header would be
/// longer than load accepts (kMaxHeaderBytes).
std::string write_header(const std::vector<std::pair<const std::string*, const Tensor*>>& order,
                         const Metadata& metadata, std::string_view file);

/// Parses and checks `text`, the header of a file whose data after the header is `data_bytes` long. Any malformed
/// or hostile content throws IOError naming `file`, the tensor and the problem.
Header read_header(const std::string& text, uint64_t data_bytes, std::string_view file);

/// What a file that starts with `head` is when it is a known format other than safetensors ("a zip archive (what
/// torch.save writes)"...); std::nullopt when its start says nothing.
std::optional<std::string> foreign_format(std::string_view head);

}  // namespace strata::io::detail
