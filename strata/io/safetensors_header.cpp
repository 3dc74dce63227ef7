// The safetensors header: see Note [The safetensors format] in safetensors.h.
#include "strata/io/safetensors_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "strata/core/error.h"

namespace strata::io::detail {

namespace {

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

// Bytes outside printable ASCII as \xNN: a message must be valid UTF-8 (Python decodes it), whatever the file holds.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    out += b >= 0x20 && b < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", b);
  }
  return out;
}

std::string json_string(std::string_view file, std::string_view what, const nlohmann::json& value) {
  try {
    return value.dump();
  } catch (const nlohmann::json::exception&) {
    STRATA_THROW(InvalidArgumentError, "save_safetensors: '{}': {} is not valid UTF-8: {}", file, what,
                 printable(value.is_string() ? value.get<std::string>() : std::string("(a metadata string)")));
  }
}

class HeaderReader {
 public:
  HeaderReader(std::string_view file, uint64_t buffer_bytes) : file_(file), buffer_bytes_(buffer_bytes) {}

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
    // A first pass checks what nlohmann's parser does not (depth, duplicate keys) in linear time; its callback
    // parser would do it too, but rescans the enclosing object after each entry, which is quadratic.
    Checker checker(*this);
    nlohmann::json::sax_parse(text, &checker);
    nlohmann::json header = nlohmann::json::parse(text);
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

  HeaderEntry entry(const std::string& name, const nlohmann::json& value) const {
    if (!value.is_object()) fail(name, fmt::format("the entry is not an object: {}", value.dump()));
    for (const auto& [k, v] : value.items()) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(name, fmt::format("unexpected field '{}'", k));
    }
    for (const char* k : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(k)) fail(name, fmt::format("the entry has no '{}'", k));
    }
    HeaderEntry e{name, DType::F32, {}, 0, 0};
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
                             info_of(e.dtype).name,
                             too_large ? std::string("more than 2^63 (too large to index)") : std::to_string(bytes),
                             e.begin, e.end, e.end - e.begin));
    }
    return e;
  }

  // The ranges must tile the data exactly, as the format requires.
  void check_layout(std::vector<HeaderEntry>& entries) const {
    std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
      return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
    });
    uint64_t at = 0;
    const HeaderEntry* previous = nullptr;
    for (const HeaderEntry& e : entries) {
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
  // nlohmann's SAX interface: refuses nesting deeper than a header has (dumping a deep value into a message would
  // recurse per level), keys named twice in one object (the format forbids them, and nlohmann keeps the last), and
  // reports syntax errors, invalid UTF-8 among them, in printable text.
  class Checker {
   public:
    explicit Checker(const HeaderReader& reader) : reader_(reader) {}
    bool null() { return value(); }
    bool boolean(bool) { return value(); }
    bool number_integer(nlohmann::json::number_integer_t) { return value(); }
    bool number_unsigned(nlohmann::json::number_unsigned_t) { return value(); }
    bool number_float(nlohmann::json::number_float_t, const std::string&) { return value(); }
    bool string(std::string&) { return value(); }
    bool binary(nlohmann::json::binary_t&) { return value(); }
    bool start_object(std::size_t) {
      value();
      keys_.emplace_back();
      return true;
    }
    bool key(std::string& key) {
      if (!keys_.back().insert(key).second) reader_.fail(fmt::format("the header names '{}' twice", key));
      return true;
    }
    bool end_object() {
      keys_.pop_back();
      return true;
    }
    bool start_array(std::size_t) {
      value();
      keys_.emplace_back();  // arrays have no keys; one stack keeps the depth of both
      return true;
    }
    bool end_array() { return end_object(); }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
      const std::string_view what = e.what();
      if (what.find("UTF-8") != std::string_view::npos) {
        reader_.fail(
            fmt::format("the header is not valid JSON: it is not valid UTF-8 (byte {} of the header)", position));
      }
      reader_.fail(fmt::format("the header is not valid JSON: {}", printable(what)));
    }

   private:
    bool value() const {
      const auto depth = static_cast<int>(keys_.size());
      if (depth > kMaxHeaderDepth) {
        reader_.fail(fmt::format("the header nests values {} levels deep; a safetensors header has at most {}", depth,
                                 kMaxHeaderDepth));
      }
      return true;
    }

    const HeaderReader& reader_;
    std::vector<std::unordered_set<std::string>> keys_;
  };

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

  std::string_view file_;
  uint64_t buffer_bytes_;
};

}  // namespace

std::string_view dtype_name(DType dtype) { return info_of(dtype).name; }

std::vector<std::pair<const std::string*, const Tensor*>> write_order(const TensorMap& tensors, std::string_view file) {
  std::vector<std::pair<const std::string*, const Tensor*>> order;
  order.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    STRATA_CHECK(name != kMetadataKey, InvalidArgumentError,
                 "save_safetensors: '{}': a tensor cannot be named \"__metadata__\"", file);
    STRATA_CHECK(t.defined(), InvalidArgumentError, "save_safetensors: '{}': tensor '{}' is undefined", file, name);
    order.emplace_back(&name, &t);
  }
  // The map gives name order; a stable sort by dtype keeps it within each dtype.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return info_of(a.second->dtype()).order > info_of(b.second->dtype()).order;
  });
  return order;
}

// Written piece by piece rather than as one nlohmann::ordered_json object, whose insertion looks every key up in a
// vector: quadratic in the number of tensors.
std::string write_header(const std::vector<std::pair<const std::string*, const Tensor*>>& order,
                         const Metadata& metadata, std::string_view file) {
  std::string text = "{";
  std::size_t metadata_bytes = 0;
  if (!metadata.empty()) {
    const std::string value = json_string(file, "a metadata key or value", nlohmann::json(metadata));
    metadata_bytes = value.size();
    text += fmt::format("\"{}\":{}", kMetadataKey, value);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    const uint64_t bytes = static_cast<uint64_t>(t->numel()) * t->element_size();
    if (text.size() > 1) text += ',';
    text += fmt::format(R"({}:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})",
                        json_string(file, fmt::format("the tensor name '{}'", printable(*name)), *name),
                        info_of(t->dtype()).name, fmt::join(t->shape().vec(), ","), offset, offset + bytes);
    offset += bytes;
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');
  STRATA_CHECK(text.size() <= kMaxHeaderBytes, InvalidArgumentError,
               "save_safetensors: '{}': the header would be {} bytes ({} of them metadata), more than the limit of {} "
               "bytes that load_safetensors (and the reference implementation) accepts; keep large values in tensors",
               file, text.size(), metadata_bytes, kMaxHeaderBytes);
  return text;
}

Header read_header(const std::string& text, uint64_t data_bytes, std::string_view file) {
  HeaderReader reader(file, data_bytes);
  const nlohmann::json parsed = reader.parse(text);
  Header header;
  header.entries.reserve(parsed.size());
  for (const auto& [name, value] : parsed.items()) {
    if (name == kMetadataKey) {
      header.metadata = reader.metadata(value);
    } else {
      header.entries.push_back(reader.entry(name, value));
    }
  }
  reader.check_layout(header.entries);
  return header;
}

std::optional<std::string> foreign_format(std::string_view head) {
  const auto starts = [&](std::string_view magic) { return head.substr(0, magic.size()) == magic; };
  if (starts("PK\x03\x04")) {
    return "a zip archive, which is what torch.save writes (a .pt or .pth file); load it with torch.load, then save "
           "its tensors with safetensors or strata.save";
  }
  // Pickle protocols 2 to 5 start with PROTO and the protocol's number.
  if (head.size() >= 2 && head[0] == '\x80' && head[1] >= 2 && head[1] <= 5) {
    return "a Python pickle, which is what torch.save wrote before PyTorch 1.6 (or pickle.dump); Strata never "
           "unpickles, since loading a pickle runs code from the file: load it with torch.load where you trust it, "
           "then save its tensors with safetensors or strata.save";
  }
  if (starts("\x93NUMPY")) return "a NumPy .npy file; read it with numpy.load and use strata.from_numpy";
  if (starts("\x89HDF\r\n\x1a\n")) return "an HDF5 file (such as Keras writes)";
  if (starts("\x1f\x8b")) return "a gzip-compressed file; decompress it first";
  return std::nullopt;
}

}  // namespace strata::io::detail
