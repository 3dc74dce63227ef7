// libFuzzer harness for read_idx, on plain and gzip'd files. The first input byte picks the mode: even, the rest of
// the input is the file as it is (the seeds include gzip streams, which the fuzzer mutates into corrupt ones); odd,
// the rest is compressed with zlib first, so the fuzzer also explores IDX headers and sizes behind a valid gzip
// stream. Every file must be read, or refused with an IOError; anything else is a finding.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "memory_file.h"
#include "strata/core/error.h"
#include "strata/data/idx.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "idx fuzz: %s\n", what);
  std::abort();
}

// The gzip stream of `size` bytes at `data`.
std::vector<unsigned char> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) finding("deflateInit2");
  std::vector<unsigned char> out(deflateBound(&z, static_cast<uLong>(size)) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) finding("deflate did not finish");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static strata::fuzz::MemoryFile file;
  if (data[0] % 2 == 0) {
    file.set(data + 1, size - 1);
  } else {
    const std::vector<unsigned char> compressed = gzip(data + 1, size - 1);
    file.set(compressed.data(), compressed.size());
  }
  try {
    const strata::Tensor t = strata::data::read_idx(file.path());
    if (t.dtype() != strata::DType::U8 || t.dim() < 1) finding("a tensor of another dtype or no dimensions came back");
    if (t.strides() != strata::contiguous_strides(t.shape())) finding("a tensor with strides not compact came back");
    if (static_cast<size_t>(t.numel()) > size * 1100) finding("more bytes came back than the file can hold");
  } catch (const strata::IOError&) {
  }
  return 0;
}
