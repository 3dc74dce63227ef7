// IDX files (yann.lecun.com/exdb/mnist): a 4-byte magic number, big-endian dimension sizes, then the data.
#include "strata/data/idx.h"


#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/data/idx_detail.h"
#include "strata/io/file.h"
#include "strata/tensor/factories.h"

namespace strata::data {

namespace {

constexpr unsigned char kUnsignedByte = 0x08;
constexpr int kMaxDims = 8;
constexpr std::size_t kChunk = std::size_t{1} << 20;

std::string_view idx_type_name(unsigned char code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return "unknown";
  }
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// gzread reads gzip streams and, transparently, plain files.
class IdxFile {
 public:
  explicit IdxFile(const std::filesystem::path& path) : path_(path) {
    const int fd = io::open_regular_file(path, "read_idx").fd;
    errno = 0;
    file_.reset(gzdopen(fd, "rb"));
    if (file_ == nullptr) {
      const std::string why = errno != 0 ? std::strerror(errno) : "out of memory";
      ::close(fd);
      STRATA_THROW(IOError, "read_idx: cannot open '{}': {}", path.string(), why);
    }
  }

  // Reads up to `n` bytes; fewer only at the end of the data.
  std::size_t read(void* out, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
      const auto want = static_cast<unsigned>(std::min(n - done, kChunk));
      const int got = gzread(file_.get(), static_cast<char*>(out) + done, want);
      if (got < 0) {
        int code = 0;
        std::string_view message = gzerror(file_.get(), &code);
        // zlib names the stream by the descriptor gzdopen got ("<fd:3>: invalid code lengths set"); ours names the
        // file instead.
        if (message.starts_with("<fd:")) {
          const auto end = message.find(">: ");
          if (end != std::string_view::npos) message.remove_prefix(end + 3);
        }
        STRATA_THROW(IOError, "read_idx: '{}' is corrupt or unreadable: {}", path_.string(),
                     code == Z_ERRNO ? std::string_view(std::strerror(errno)) : message);
      }
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

 private:
  std::filesystem::path path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

}  // namespace

namespace {

Tensor read(const std::filesystem::path& path, std::optional<int> expected_ndim, std::string_view what) {
  IdxFile file(path);
  const std::string name = path.string();
  unsigned char magic[4] = {};
  const std::size_t got_magic = file.read(magic, 4);
  STRATA_CHECK(got_magic == 4, IOError, "read_idx: '{}' is truncated: expected a 4-byte magic number, found {} bytes",
               name, got_magic);
  STRATA_CHECK(magic[0] == 0 && magic[1] == 0, IOError,
               "read_idx: '{}' is not an IDX file: the magic number must start with 0x00 0x00, found 0x{:02X} 0x{:02X}",
               name, magic[0], magic[1]);
  STRATA_CHECK(magic[2] == kUnsignedByte, IOError,
               "read_idx: '{}' holds elements of type 0x{:02X} ({}); only unsigned byte (0x08) is supported", name,
               magic[2], idx_type_name(magic[2]));
  const int ndim = magic[3];
  STRATA_CHECK(ndim >= 1 && ndim <= kMaxDims, IOError,
               "read_idx: '{}' declares {} dimensions; expected between 1 and {}", name, ndim, kMaxDims);
  // Before the sizes are read: a wrong header would otherwise be reported as data missing for a shape it made up.
  STRATA_CHECK(!expected_ndim || ndim == *expected_ndim, IOError, "read_idx: '{}' declares {} dimensions, but {} has {}",
               name, ndim, what, expected_ndim.value_or(0));

  unsigned char dims[4 * kMaxDims] = {};
  const auto dims_bytes = static_cast<std::size_t>(4 * ndim);
  const std::size_t got_dims = file.read(dims, dims_bytes);
  STRATA_CHECK(got_dims == dims_bytes, IOError,
               "read_idx: '{}' is truncated: expected {} bytes of dimension sizes, found {}", name, dims_bytes,
               got_dims);
  Shape shape;
  for (int d = 0; d < ndim; ++d) {
    const unsigned char* b = dims + 4 * d;
    const uint32_t size = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
    STRATA_CHECK(size <= static_cast<uint32_t>(std::numeric_limits<int32_t>::max()), IOError,
                 "read_idx: '{}' declares dimension {} of size {}, which is larger than the format allows", name, d,
                 size);
    shape.push_back(size);
  }
  // Also with a zero dimension the others must be indexable, or the tensor's strides overflow.
  STRATA_CHECK(checked_span(shape).has_value(), IOError, "read_idx: '{}' declares shape {}, too large to index", name,
               shape);
  const auto count = static_cast<std::size_t>(numel(shape));

  // Read into chunks that double in size rather than allocating the declared size up front: a corrupt header must not
  // be able to make us allocate gigabytes before we find out the data is not there. The chunks then move into the
  // tensor one by one, each freed once copied, so at the peak the process holds the data and one chunk (at most half
  // of it), not twice the data, as one growing buffer copied into the tensor at the end did (47 MB more for
  // Fashion-MNIST's training images).
  std::vector<std::vector<unsigned char>> chunks;
  std::size_t have = 0;
  while (have < count) {
    const std::size_t want = std::min(count - have, std::max(kChunk, have));
    std::vector<unsigned char> chunk;
    try {
      chunk.resize(want);
    } catch (const std::bad_alloc&) {
      STRATA_THROW(IOError,
                   "read_idx: '{}' declares shape {} ({} bytes of data); {} bytes of it read, no memory for more", name,
                   shape, count, have);
    }
    const std::size_t got = file.read(chunk.data(), want);
    have += got;
    STRATA_CHECK(got == want, IOError, "read_idx: '{}' is truncated: shape {} needs {} bytes of data, found {}", name,
                 shape, count, have);
    chunks.push_back(std::move(chunk));
  }
  unsigned char extra[64];
  const std::size_t trailing = file.read(extra, sizeof(extra));
  STRATA_CHECK(trailing == 0, IOError, "read_idx: '{}' has trailing bytes: shape {} needs {} bytes of data, found more",
               name, shape, count);

  Tensor out = empty(shape, DType::U8);
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  for (std::vector<unsigned char>& chunk : chunks) {
    if (!chunk.empty()) std::memcpy(dst, chunk.data(), chunk.size());
    dst += chunk.size();
    std::vector<unsigned char>().swap(chunk);  // frees it now
  }
  return out;
}

}  // namespace

Tensor read_idx(const std::filesystem::path& path) { return read(path, std::nullopt, ""); }

Tensor detail::read_idx_of_rank(const std::filesystem::path& path, int ndim, std::string_view what) {
  return read(path, ndim, what);
}

}  // namespace strata::data
