// libFuzzer harness for from_dlpack: a DLManagedTensor built from the input (dtype code, bits and lanes, device type
// and id, ndim, shape, strides or none, byte_offset, where data points) must be taken, or refused with an
// InvalidArgumentError (ShapeError, DTypeError) or a DeviceUnavailableError; anything else is a finding. The input
// is read in order, little-endian, as zeros past its end: u8 dtype code, u8 bits, u16 lanes, i32 device type, i32
// device id, i8 ndim, u8 flags (1: strides are given, 2: data is null), u8 where data points in the buffer (modulo
// 65), u64 byte_offset, then for each dimension an i64 size and, with strides, an i64 stride.
//
// DLPack gives no buffer size: a producer vouches for the memory its descriptor reaches. This harness's data always
// points into one buffer of kBufferBytes, so after an import it computes, in 128-bit arithmetic, how far the tensor
// reaches; only when that is inside the buffer, and the elements are few, does it read every one (a copy). It also
// checks ownership (Note [DLPack ownership]): a refused tensor stays the caller's, a taken one is deleted exactly once.
#include <dlpack/dlpack.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "strata/core/error.h"
#include "strata/io/dlpack.h"

namespace {

constexpr std::size_t kBufferBytes = 4096;
alignas(64) unsigned char buffer[kBufferBytes];

int deletions = 0;

// Reads the input's fields in order; zeros once it has run out.
class Reader {
 public:
  Reader(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  template <typename T>
  T next() {
    unsigned char bytes[sizeof(T)] = {};
    for (std::size_t i = 0; i < sizeof(T) && at_ < size_; ++i) bytes[i] = data_[at_++];
    T value;
    std::memcpy(&value, bytes, sizeof(T));  // little-endian, as the host
    return value;
  }

 private:
  const uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "dlpack fuzz: %s\n", what);
  std::abort();
}

// The bytes from its first element to the end of its last that `t` reaches.
__int128 reach_bytes(const strata::Tensor& t) {
  if (t.numel() == 0) return 0;
  __int128 last = 0;
  for (int64_t i = 0; i < t.dim(); ++i) last += static_cast<__int128>(t.shape()[i] - 1) * t.strides()[i];
  return (last + 1) * static_cast<__int128>(t.element_size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Two CPU devices, so that device ids name cpu:1 too (Note [Virtual CPU devices]).
  ::setenv("STRATA_CPU_DEVICES", "2", 1);
  // Bytes 0 and 1 only: valid as bool too, and any value of every other dtype.
  for (std::size_t i = 0; i < kBufferBytes; ++i) buffer[i] = static_cast<unsigned char>(i & 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
  DLTensor& dl = managed.dl_tensor;
  dl.dtype.code = in.next<uint8_t>();
  dl.dtype.bits = in.next<uint8_t>();
  dl.dtype.lanes = in.next<uint16_t>();
  // Read as a plain integer: a fuzzed device type need not be one of the enum's values.
  const auto device_type = in.next<int32_t>();
  static_assert(sizeof(dl.device.device_type) == sizeof(device_type));
  std::memcpy(&dl.device.device_type, &device_type, sizeof(device_type));
  dl.device.device_id = in.next<int32_t>();
  dl.ndim = in.next<int8_t>();
  const auto flags = in.next<uint8_t>();
  const bool with_strides = (flags & 1) != 0;
  const bool null_data = (flags & 2) != 0;
  const std::size_t start = in.next<uint8_t>() % 65;
  dl.byte_offset = in.next<uint64_t>();
  for (int i = 0; i < dl.ndim; ++i) {
    shape.push_back(in.next<int64_t>());
    if (with_strides) strides.push_back(in.next<int64_t>());
  }
  dl.shape = shape.empty() ? nullptr : shape.data();
  dl.strides = with_strides && !strides.empty() ? strides.data() : nullptr;
  dl.data = null_data ? nullptr : buffer + start;
  managed.deleter = [](DLManagedTensor*) { ++deletions; };

  deletions = 0;
  try {
    strata::Tensor t = strata::io::from_dlpack(&managed);
    if (t.dim() != dl.ndim) finding("the tensor has another number of dimensions than the descriptor");
    for (int i = 0; i < dl.ndim; ++i) {
      if (t.shape()[i] != shape[i] || (dl.strides != nullptr && t.strides()[i] != strides[i])) {
        finding("the tensor has another shape or other strides than the descriptor");
      }
    }
    const __int128 reach = reach_bytes(t);
    const __int128 end = static_cast<__int128>(start) + dl.byte_offset + reach;
    // A broadcast view (stride 0) may have billions of elements on a few bytes: its copy would not be small.
    const bool small = t.numel() <= static_cast<int64_t>(kBufferBytes);
    if (!null_data && end <= static_cast<__int128>(kBufferBytes) && small) {
      const strata::Tensor copy = t.clone();
      if (copy.numel() != t.numel()) finding("a copy has another number of elements");
    }
    DLManagedTensor* again = strata::io::to_dlpack(t);
    again->deleter(again);
    t = strata::Tensor();
    if (deletions != 1) finding("a taken tensor was not deleted exactly once");
  } catch (const strata::InvalidArgumentError&) {
    if (deletions != 0) finding("a refused tensor was deleted");
  } catch (const strata::DeviceUnavailableError&) {
    if (deletions != 0) finding("a refused tensor was deleted");
  }
  return 0;
}
