// Safetensors checkpoints: see Note [The safetensors format].
#include "strata/io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "strata/core/error.h"
#include "strata/io/file.h"
#include "strata/tensor/factories.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping here");

namespace strata::io {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation
constexpr std::string_view kMetadataKey = "__metadata__";
constexpr int kMaxHeaderDepth = 3;  // header object > tensor entry > shape array > integer

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int order;  // the reference's Dtype enum order: tensors are written by descending order (widest first)
};

constexpr std::array<DTypeInfo, kDTypeCount> kDTypes = {{{DType::Bool, "BOOL", 0},
                                                         {DType::U8, "U8", 1},
                                                         {DType::F16, "F16", 7},
                                                         {DType::BF16, "BF16", 8},
                                                         {DType::I32, "I32", 9},
                                                         {DType::F32, "F32", 11},
                                                         {DType::F64, "F64", 12},
                                                         {DType::I64, "I64", 13}}};
// Valid in the format, but without a Strata dtype.
constexpr std::array<std::string_view, 11> kForeignDTypes = {"I8",      "I16",     "U16", "U32",     "U64", "F8_E5M2",
                                                             "F8_E4M3", "F8_E8M0", "C64", "F6_E2M3", "F4"};

const DTypeInfo& info_of(DType dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dtype == dtype) return d;
  }
  STRATA_THROW(DTypeError, "safetensors: no safetensors name for dtype {}", dtype);
}

std::function<void(const std::string&)>& save_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

// One tensor's entry, as read from a header.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

class HeaderReader {
 public:
  HeaderReader(std::string file, uint64_t buffer_bytes) : file_(std::move(file)), buffer_bytes_(buffer_bytes) {}

  [[noreturn]] void fail(const std::string& what) const {
    STRATA_THROW(IOError, "load_safetensors: '{}': {}", file_, what);
  }
  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    STRATA_THROW(IOError, "load_safetensors: '{}': tensor '{}': {}", file_, name, what);
  }

  nlohmann::json parse(const std::string& text) const {
    if (text.empty() || text.front() != '{') fail("the header is not a JSON object (it must start with '{')");
    // nlohmann would take a NUL byte for the end of the text and ignore what follows it.
    if (const auto nul = text.find('\0'); nul != std::string::npos) {
      fail(fmt::format("the header holds a NUL byte at offset {}", nul));
    }
    // Duplicate keys are forbidden by the format, and nlohmann would silently keep the last one.
    std::vector<std::set<std::string>> keys;
    std::optional<std::string> duplicate;
    auto check_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      using E = nlohmann::json::parse_event_t;
      // A header is an object of objects whose shape and data_offsets are arrays of integers: values at depth 3 at
      // most. Deeper nesting is refused while parsing, since dumping a value into a message recurses per level.
      if (depth > kMaxHeaderDepth) {
        fail(fmt::format("the header nests values {} levels deep; a safetensors header has at most {}", depth,
                         kMaxHeaderDepth));
      }
      if (event == E::object_start) keys.emplace_back();
      if (event == E::object_end) keys.pop_back();
      if (event == E::key && !keys.back().insert(parsed.get<std::string>()).second) {
        duplicate = parsed.get<std::string>();
      }
      return true;
    };
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text, check_keys);
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("the header is not valid JSON: {}", e.what()));
    }
    if (duplicate) fail(fmt::format("the header names '{}' twice", *duplicate));
    if (!header.is_object()) fail("the header is not a JSON object");
    return header;
  }

  Metadata metadata(const nlohmann::json& value) const {
    if (!value.is_object()) fail("\"__metadata__\" must be an object of strings");
    Metadata out;
    for (const auto& [k, v] : value.items()) {
      if (!v.is_string()) fail(fmt::format("\"__metadata__\" value of '{}' is not a string: {}", k, v.dump()));
      out.emplace(k, v.get<std::string>());
    }
    return out;
  }

  Entry entry(const std::string& name, const nlohmann::json& value) const {
    if (!value.is_object()) fail(name, fmt::format("the entry is not an object: {}", value.dump()));
    for (const auto& [k, v] : value.items()) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(name, fmt::format("unexpected field '{}'", k));
    }
    for (const char* k : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(k)) fail(name, fmt::format("the entry has no '{}'", k));
    }
    Entry e{name, DType::F32, {}, 0, 0};
    e.dtype = dtype(name, value["dtype"]);
    const auto& shape = value["shape"];
    if (!shape.is_array()) fail(name, fmt::format("shape must be an array of integers, got {}", shape.dump()));
    for (const auto& d : shape) {
      if (!d.is_number_integer()) fail(name, fmt::format("shape {} holds {}, not an integer", shape.dump(), d.dump()));
      if (!d.is_number_unsigned()) {
        fail(name, d.get<int64_t>() < 0 ? fmt::format("shape {} has a negative dimension", shape.dump())
                                        : fmt::format("shape {} has a dimension written as -0; write 0", shape.dump()));
      }
      const auto size = d.get<uint64_t>();
      if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(name, fmt::format("shape {} has a dimension too large", shape.dump()));
      }
      e.shape.push_back(static_cast<int64_t>(size));
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(name, fmt::format("data_offsets must be two non-negative integers [begin, end], got {}", offsets.dump()));
    }
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end) fail(name, fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
    if (e.end > buffer_bytes_) {
      fail(name,
           fmt::format("data_offsets [{}, {}] reach past the data, which is {} bytes", e.begin, e.end, buffer_bytes_));
    }
    const auto elem = static_cast<int64_t>(dtype_size(e.dtype));
    // Also with a zero dimension the others must be indexable (checked_span), or the tensor's strides overflow.
    const bool too_large = !checked_span(e.shape, elem).has_value();
    const auto bytes = too_large ? 0 : static_cast<uint64_t>(numel(e.shape) * elem);
    if (too_large || bytes != e.end - e.begin) {
      fail(name, fmt::format("shape {} of {} needs {} bytes, but data_offsets [{}, {}] hold {}", shape_str(e.shape),
                             safetensors_dtype_name(e.dtype),
                             too_large ? std::string("more than 2^63 (too large to index)") : std::to_string(bytes),
                             e.begin, e.end, e.end - e.begin));
    }
    return e;
  }

  // The ranges must tile the data exactly, as the format requires.
  void check_layout(std::vector<Entry>& entries) const {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
    uint64_t at = 0;
    const Entry* previous = nullptr;
    for (const Entry& e : entries) {
      if (e.begin < at) {
        fail(e.name, fmt::format("data_offsets [{}, {}] overlap those of '{}' [{}, {}]", e.begin, e.end, previous->name,
                                 previous->begin, previous->end));
      }
      if (e.begin > at) fail(e.name, fmt::format("bytes [{}, {}) before it belong to no tensor", at, e.begin));
      at = e.end;
      previous = &e;
    }
    if (at != buffer_bytes_) {
      fail(fmt::format("the data is {} bytes but the tensors cover only [0, {}): {} trailing bytes", buffer_bytes_, at,
                       buffer_bytes_ - at));
    }
  }

 private:
  DType dtype(const std::string& name, const nlohmann::json& value) const {
    if (!value.is_string()) fail(name, fmt::format("dtype must be a string, got {}", value.dump()));
    const auto text = value.get<std::string>();
    for (const DTypeInfo& d : kDTypes) {
      if (d.name == text) return d.dtype;
    }
    if (std::find(kForeignDTypes.begin(), kForeignDTypes.end(), text) != kForeignDTypes.end()) {
      fail(name, fmt::format("dtype {} has no Strata equivalent", text));
    }
    fail(name, fmt::format("unknown dtype '{}'", text));
  }

  std::string file_;
  uint64_t buffer_bytes_;
};

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) { return info_of(dtype).name; }

void detail::set_save_hook(std::function<void(const std::string& name)> hook) { save_hook() = std::move(hook); }

void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors, const Metadata& metadata) {
  const std::string file = path.string();
  std::vector<std::pair<const std::string*, const Tensor*>> order;
  for (const auto& [name, t] : tensors) {
    STRATA_CHECK(name != kMetadataKey, InvalidArgumentError,
                 "save_safetensors: '{}': a tensor cannot be named \"__metadata__\"", file);
    STRATA_CHECK(t.defined(), InvalidArgumentError, "save_safetensors: '{}': tensor '{}' is undefined", file, name);
    order.emplace_back(&name, &t);
  }
  // Widest dtype first, then by name: every tensor stays aligned to its element size (the header is padded to 8).
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return info_of(a.second->dtype()).order > info_of(b.second->dtype()).order;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    const uint64_t bytes = static_cast<uint64_t>(t->numel()) * t->element_size();
    header[*name] = {{"dtype", safetensors_dtype_name(t->dtype())},
                     {"shape", t->shape().vec()},
                     {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    STRATA_THROW(InvalidArgumentError, "save_safetensors: '{}': a name or metadata string is not valid UTF-8 ({})",
                 file, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::array<unsigned char, 8> length{};
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * i));

  AtomicFile out(path, "save_safetensors");
  out.write(length.data(), length.size());
  out.write(text.data(), text.size());
  for (const auto& [name, t] : order) {
    if (save_hook()) save_hook()(*name);
    const Tensor host = (t->device().is_cpu() ? *t : t->to(kCPU)).contiguous();  // any CPU device is host memory
    if (host.numel() > 0) out.write(host.data_ptr(), static_cast<std::size_t>(host.numel()) * host.element_size());
  }
  out.commit();
}

SafetensorsContent load_safetensors(const std::filesystem::path& path, Device device) {
  const std::string file = path.string();
  ReadOnlyFile in(path, "load_safetensors");
  STRATA_CHECK(in.size() >= 8, IOError,
               "load_safetensors: '{}': the file is {} bytes; a safetensors file starts with an 8-byte header length",
               file, in.size());
  std::array<unsigned char, 8> length{};
  in.read_at(0, length.data(), length.size());
  uint64_t header_bytes = 0;
  for (std::size_t i = 0; i < 8; ++i) header_bytes |= uint64_t{length[i]} << (8 * i);
  STRATA_CHECK(header_bytes <= kMaxHeaderBytes, IOError,
               "load_safetensors: '{}': the header length is {} bytes, more than the limit of {} bytes", file,
               header_bytes, kMaxHeaderBytes);
  STRATA_CHECK(header_bytes <= in.size() - 8, IOError,
               "load_safetensors: '{}': the header length is {} bytes but only {} bytes follow it", file, header_bytes,
               in.size() - 8);
  std::string text(static_cast<std::size_t>(header_bytes), '\0');
  in.read_at(8, text.data(), text.size());

  const uint64_t data_start = 8 + header_bytes;
  HeaderReader reader(file, in.size() - data_start);
  const nlohmann::json header = reader.parse(text);
  SafetensorsContent content;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      content.metadata = reader.metadata(value);
    } else {
      entries.push_back(reader.entry(name, value));
    }
  }
  reader.check_layout(entries);

  // Everything checked: now allocate and read.
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) in.read_at(data_start + e.begin, t.data_ptr(), static_cast<std::size_t>(e.end - e.begin));
    if (e.dtype == DType::Bool) {
      const auto* b = t.data<uint8_t>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (b[i] > 1) reader.fail(e.name, fmt::format("BOOL element {} holds byte {}, not 0 or 1", i, int{b[i]}));
      }
    }
    content.tensors.emplace(e.name, t.to(device));
  }
  return content;
}

}  // namespace strata::io
