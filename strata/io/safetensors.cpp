// Safetensors checkpoints: see Note [The safetensors format].
#include "strata/io/safetensors.h"

#include <array>
#include <bit>
#include <cstring>

#include "strata/core/error.h"
#include "strata/io/file.h"
#include "strata/io/safetensors_header.h"
#include "strata/tensor/factories.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping here");

namespace strata::io {

namespace {

std::function<void(const std::string&)>& save_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

// Small tensors are gathered into one write: a checkpoint of many tiny tensors would otherwise cost a system call
// each.
class BufferedWriter {
 public:
  explicit BufferedWriter(std::function<void(const void*, std::size_t)> write) : write_(std::move(write)) {}
  void write(const void* data, std::size_t bytes) {
    if (buffer_.size() + bytes > kBufferBytes) flush();
    if (bytes >= kBufferBytes) {
      write_(data, bytes);
    } else {
      buffer_.append(static_cast<const char*>(data), bytes);
    }
  }
  void flush() {
    if (!buffer_.empty()) write_(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

 private:
  static constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
  std::function<void(const void*, std::size_t)> write_;
  std::string buffer_;
};

// What a save writes, checked before anything is: a refused save creates no file.
struct Prepared {
  std::vector<std::pair<const std::string*, const Tensor*>> order;
  std::string header;
};

Prepared prepare(const TensorMap& tensors, const Metadata& metadata, std::string_view file) {
  Prepared p;
  p.order = detail::write_order(tensors, file);
  p.header = detail::write_header(p.order, metadata, file);
  return p;
}

void write_contents(BufferedWriter& out, const Prepared& prepared) {
  const std::string& text = prepared.header;
  std::array<unsigned char, 8> length{};
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(uint64_t{text.size()} >> (8 * i));
  out.write(length.data(), length.size());
  out.write(text.data(), text.size());
  for (const auto& [name, t] : prepared.order) {
    if (save_hook()) save_hook()(*name);
    const Tensor host = (t->device().is_cpu() ? *t : t->to(kCPU)).contiguous();  // any CPU device is host memory
    if (host.numel() > 0) out.write(host.data_ptr(), static_cast<std::size_t>(host.numel()) * host.element_size());
  }
  out.flush();
}

// Bytes in memory, read as a file is.
class MemorySource {
 public:
  MemorySource(std::string_view data, std::string_view name) : data_(data), name_(name) {}
  uint64_t size() const { return data_.size(); }
  void read_at(uint64_t offset, void* out, std::size_t bytes) const {
    STRATA_CHECK(offset <= data_.size() && bytes <= data_.size() - offset, IOError,
                 "load_safetensors: '{}' ended early at byte {}", name_, offset);
    std::memcpy(out, data_.data() + offset, bytes);
  }

 private:
  std::string_view data_;
  std::string_view name_;
};

template <typename Source>
SafetensorsContent read_contents(const Source& in, std::string_view file, Device device) {
  std::array<char, 16> head{};
  const std::size_t head_bytes = std::min<uint64_t>(in.size(), head.size());
  in.read_at(0, head.data(), head_bytes);
  // A file another tool wrote fails one of the checks below; it is then named, rather than its first bytes read
  // as a header length.
  const auto refuse = [&](const std::string& why) {
    if (const auto foreign = detail::foreign_format(std::string_view(head.data(), head_bytes))) {
      STRATA_THROW(IOError, "load_safetensors: '{}': this is not a safetensors file: it looks like {}", file, *foreign);
    }
    STRATA_THROW(IOError, "load_safetensors: '{}': {}", file, why);
  };
  if (in.size() < 8) {
    refuse(fmt::format("the file is {} bytes; a safetensors file starts with an 8-byte header length", in.size()));
  }
  uint64_t header_bytes = 0;
  for (std::size_t i = 0; i < 8; ++i) header_bytes |= uint64_t{static_cast<unsigned char>(head[i])} << (8 * i);
  if (header_bytes > detail::kMaxHeaderBytes) {
    refuse(fmt::format("the header length is {} bytes, more than the limit of {} bytes", header_bytes,
                       detail::kMaxHeaderBytes));
  }
  if (header_bytes > in.size() - 8) {
    refuse(fmt::format("the header length is {} bytes but only {} bytes follow it", header_bytes, in.size() - 8));
  }
  if (header_bytes == 0 || head[8] != '{') refuse("the header is not a JSON object (it must start with '{')");
  std::string text(static_cast<std::size_t>(header_bytes), '\0');
  in.read_at(8, text.data(), text.size());

  const uint64_t data_start = 8 + header_bytes;
  detail::Header header = detail::read_header(text, in.size() - data_start, file);
  SafetensorsContent content;
  content.metadata = std::move(header.metadata);
  // Everything checked: now allocate and read.
  for (const detail::HeaderEntry& e : header.entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) in.read_at(data_start + e.begin, t.data_ptr(), static_cast<std::size_t>(e.end - e.begin));
    if (e.dtype == DType::Bool) {
      const auto* b = t.data<uint8_t>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        STRATA_CHECK(b[i] <= 1, IOError, "load_safetensors: '{}': tensor '{}': BOOL element {} holds byte {}, not 0 or 1",
                     file, e.name, i, int{b[i]});
      }
    }
    content.tensors.emplace_hint(content.tensors.end(), e.name, t.to(device));
  }
  return content;
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) { return detail::dtype_name(dtype); }

void detail::set_save_hook(std::function<void(const std::string& name)> hook) { save_hook() = std::move(hook); }

void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors, const Metadata& metadata) {
  const Prepared prepared = prepare(tensors, metadata, path.string());
  AtomicFile out(path, "save_safetensors");
  BufferedWriter writer([&out](const void* data, std::size_t bytes) { out.write(data, bytes); });
  write_contents(writer, prepared);
  out.commit();
}

std::string save_safetensors_bytes(const TensorMap& tensors, const Metadata& metadata, std::string_view name) {
  const Prepared prepared = prepare(tensors, metadata, name);
  std::string bytes;
  BufferedWriter writer([&bytes](const void* data, std::size_t n) { bytes.append(static_cast<const char*>(data), n); });
  write_contents(writer, prepared);
  return bytes;
}

SafetensorsContent load_safetensors(const std::filesystem::path& path, Device device) {
  const ReadOnlyFile in(path, "load_safetensors");
  return read_contents(in, path.string(), device);
}

SafetensorsContent load_safetensors_bytes(std::string_view data, Device device, std::string_view name) {
  return read_contents(MemorySource(data, name), name, device);
}

}  // namespace strata::io
