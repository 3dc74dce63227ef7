#pragma once

// A reader of TensorBoard event files for tests, independent of the writer's encoder (strata/io/summary_writer.h):
// TFRecord framing with both CRCs checked, and the protobuf fields of Note [TensorBoard event files] decoded from the
// wire format.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/io/summary_writer.h"
#include "test_files.h"

namespace strata::testing {

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits, counts;
};

struct Value {
  std::string tag;
  std::optional<float> simple_value;
  std::optional<Histogram> histo;
};

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<Value> values;
};

struct Records {
  std::vector<std::string> data;   // the whole records' data, in order
  std::size_t trailing_bytes = 0;  // bytes after the last whole record
};

inline uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

template <typename T>
T little_endian(std::string_view bytes, std::size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}

inline Records read_records(const std::filesystem::path& path) {
  const Bytes bytes = read_file(path);
  const std::string_view file(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  Records out;
  std::size_t at = 0;
  while (at + 12 <= file.size()) {
    const auto length = little_endian<uint64_t>(file, at);
    EXPECT_EQ(little_endian<uint32_t>(file, at + 8), masked(crc32c(file.substr(at, 8)))) << "length CRC at " << at;
    if (at + 12 + length + 4 > file.size()) break;
    const std::string_view data = file.substr(at + 12, length);
    EXPECT_EQ(little_endian<uint32_t>(file, at + 12 + length), masked(crc32c(data))) << "data CRC at " << at;
    out.data.emplace_back(data);
    at += 12 + length + 4;
  }
  out.trailing_bytes = file.size() - at;
  return out;
}

// Protobuf's wire format: a key (field << 3 | wire type), then a varint, 8 bytes, a length and bytes, or 4 bytes.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;
  std::string_view bytes;  // fixed or length-delimited
};

inline uint64_t read_varint(std::string_view in, std::size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < in.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(in[at++]);
    v |= uint64_t{b & 0x7Fu} << shift;
    if ((b & 0x80) == 0) return v;
  }
  ADD_FAILURE() << "truncated varint";
  return v;
}

inline std::vector<Field> fields(std::string_view in) {
  std::vector<Field> out;
  std::size_t at = 0;
  while (at < in.size()) {
    const uint64_t key = read_varint(in, at);
    Field f{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
    const std::size_t size = f.wire == 1 ? 8 : f.wire == 5 ? 4 : f.wire == 2 ? read_varint(in, at) : 0;
    if (f.wire == 0) f.varint = read_varint(in, at);
    EXPECT_LE(at + size, in.size());
    f.bytes = in.substr(at, size);
    at += size;
    out.push_back(f);
  }
  return out;
}

inline std::vector<double> packed_doubles(std::string_view bytes) {
  std::vector<double> out(bytes.size() / 8);
  std::memcpy(out.data(), bytes.data(), out.size() * 8);
  return out;
}

inline Event parse_event(std::string_view data) {
  Event e;
  for (const Field& f : fields(data)) {
    if (f.number == 1) e.wall_time = little_endian<double>(f.bytes, 0);
    if (f.number == 2) e.step = static_cast<int64_t>(f.varint);
    if (f.number == 3) e.file_version = std::string(f.bytes);
    if (f.number != 5) continue;
    for (const Field& s : fields(f.bytes)) {
      EXPECT_EQ(s.number, 1u);
      Value v;
      for (const Field& vf : fields(s.bytes)) {
        if (vf.number == 1) v.tag = std::string(vf.bytes);
        if (vf.number == 2) v.simple_value = little_endian<float>(vf.bytes, 0);
        if (vf.number != 5) continue;
        Histogram h;
        for (const Field& hf : fields(vf.bytes)) {
          double* const slots[] = {&h.min, &h.max, &h.num, &h.sum, &h.sum_squares};
          if (hf.number >= 1 && hf.number <= 5) *slots[hf.number - 1] = little_endian<double>(hf.bytes, 0);
          if (hf.number == 6) h.limits = packed_doubles(hf.bytes);
          if (hf.number == 7) h.counts = packed_doubles(hf.bytes);
        }
        v.histo = h;
      }
      e.values.push_back(v);
    }
  }
  return e;
}

inline std::vector<Event> read_events(const std::filesystem::path& path) {
  std::vector<Event> out;
  for (const std::string& data : read_records(path).data) out.push_back(parse_event(data));
  return out;
}

inline std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) out.push_back(entry.path());
  }
  return out;
}

}  // namespace strata::testing
