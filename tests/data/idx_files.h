#pragma once

// Writes small IDX files, plain or gzip'd, for the data tests. The gzip writer builds the stream by hand (stored
// deflate blocks, RFC 1951/1952), so the tests need no compression library of their own.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "test_files.h"

namespace strata::testing {

inline uint32_t crc32(const Bytes& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : data) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline void put_le32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

inline void put_be32(Bytes& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

/// The gzip stream of `data`, in stored (uncompressed) deflate blocks.
inline Bytes gzip(const Bytes& data) {
  Bytes out = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(data.size() - pos, 65535);
    const bool last = pos + n == data.size();
    out.push_back(last ? 0x01 : 0x00);
    out.push_back(static_cast<unsigned char>(n));
    out.push_back(static_cast<unsigned char>(n >> 8));
    out.push_back(static_cast<unsigned char>(~n));
    out.push_back(static_cast<unsigned char>(~n >> 8));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
               data.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < data.size());
  put_le32(out, crc32(data));
  put_le32(out, static_cast<uint32_t>(data.size()));
  return out;
}

/// An IDX file's bytes: magic 0x00 0x00 `type` ndim, big-endian sizes, then `data`.
inline Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data, unsigned char type = 0x08) {
  Bytes out = {0x00, 0x00, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace strata::testing
