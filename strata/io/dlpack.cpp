// DLPack exchange: see Note [DLPack ownership].
#include "strata/io/dlpack.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/registry.h"

namespace strata::io {

namespace {

// kDLBool arrived in DLPack 0.8; Debian ships 0.6, so we name the code ourselves.
constexpr uint8_t kDLBoolCode = 6;
// NumPy's and PyTorch's most dimensions; a descriptor that claims more is forged or broken.
constexpr int32_t kMaxDims = 64;

// Note [Checking a DLPack producer's host memory]
// DLPack gives no sizes for the memory it points to: the producer vouches for its shape and strides arrays and for
// the data its shape reaches. A forged or broken descriptor (a byte_offset of 2**40, an ndim larger than its shape
// array) would make us read, and later write, wherever it points. For host memory we ask the kernel, in two cheap
// system calls, instead of faulting: msync(MS_ASYNC) fails with ENOMEM when a page of the range is not mapped (and
// does nothing else since Linux 2.6.19), and process_vm_readv of the range's first and last byte fails on memory
// that is mapped but unreadable (a PROT_NONE guard region, such as the reserve of a malloc arena). Where
// process_vm_readv is not allowed (some seccomp profiles), msync's answer stands. Reading /proc/self/maps would
// also give the pages' rights, at hundreds of microseconds an import. Device memory cannot be checked this way; it
// stays the producer's word, as in every DLPack consumer.
bool host_memory_readable(const void* data, std::size_t bytes) {
  if (bytes == 0) return true;
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first_page = begin & ~(page - 1);
  if (msync(reinterpret_cast<void*>(first_page), begin + bytes - first_page, MS_ASYNC) != 0 && errno == ENOMEM) {
    return false;
  }
  char probe[2];
  iovec local[2] = {{&probe[0], 1}, {&probe[1], 1}};
  iovec remote[2] = {{const_cast<void*>(data), 1}, {reinterpret_cast<void*>(begin + bytes - 1), 1}};
  const ssize_t read = process_vm_readv(getpid(), local, 2, remote, 2, 0);
  return read == 2 || (read < 0 && errno != EFAULT);
}

// What to_dlpack hands out: the DLManagedTensor and everything it points to, freed together by the deleter.
struct Exported {
  // The storage, not a Tensor handle: a handle can be pointed at other data later (Tensor::set_data).
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

void delete_exported(DLManagedTensor* self) {
  std::unique_ptr<Exported> owned(static_cast<Exported*>(self->manager_ctx));
}

// Keeps a producer's DLManagedTensor while a Storage uses its memory (see Note [DLPack ownership]).
struct Imported {
  Storage storage;
  DLManagedTensor* managed = nullptr;
  ~Imported() {
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
};

DLDataType to_dl(DType dtype) {
  const auto bits = static_cast<uint8_t>(dtype_size(dtype) * 8);
  switch (dtype) {
    case DType::Bool: return {kDLBoolCode, 8, 1};
    case DType::U8: return {kDLUInt, bits, 1};
    case DType::I32:
    case DType::I64: return {kDLInt, bits, 1};
    case DType::F16:
    case DType::F32:
    case DType::F64: return {kDLFloat, bits, 1};
    case DType::BF16: return {kDLBfloat, bits, 1};
  }
  STRATA_THROW(DTypeError, "to_dlpack: dtype {} has no DLPack code", dtype);
}

DType from_dl(DLDataType t) {
  STRATA_CHECK(t.lanes == 1, DTypeError, "from_dlpack: lanes is {}; only scalar element types (1 lane) are supported",
               t.lanes);
  switch (t.code) {
    case kDLUInt:
      if (t.bits == 8) return DType::U8;
      break;
    case kDLInt:
      if (t.bits == 32) return DType::I32;
      if (t.bits == 64) return DType::I64;
      break;
    case kDLFloat:
      if (t.bits == 16) return DType::F16;
      if (t.bits == 32) return DType::F32;
      if (t.bits == 64) return DType::F64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::BF16;
      break;
    case kDLBoolCode:
      if (t.bits == 8) return DType::Bool;
      break;
    default: break;
  }
  const char* kind = t.code == kDLInt        ? "int"
                     : t.code == kDLUInt     ? "uint"
                     : t.code == kDLFloat    ? "float"
                     : t.code == kDLBfloat   ? "bfloat"
                     : t.code == kDLComplex  ? "complex"
                     : t.code == kDLBoolCode ? "bool"
                                             : "code";
  STRATA_THROW(DTypeError,
               "from_dlpack: DLPack type {}{} (code {}) has no Strata dtype; supported: bool, uint8, int32, int64, "
               "float16, bfloat16, float32, float64",
               kind, t.bits, t.code);
}

Device from_dl(const DLDevice& d) {
  // Read as a plain integer: newer DLPack versions have device types beyond the enum we build against.
  int32_t type = 0;
  static_assert(sizeof(d.device_type) == sizeof(type));
  std::memcpy(&type, &d.device_type, sizeof(type));
  switch (type) {
    case kDLCPU:
      // DLPack gives CPU ids no meaning (NumPy and PyTorch write 0, PyTorch ignores them); ours name a virtual CPU
      // device (Note [Virtual CPU devices]), so an id that names one of ours comes back there, and any other to cpu:0.
      return d.device_id > 0 && d.device_id < cpu_device_count() ? Device(DeviceType::CPU, d.device_id) : kCPU;
    case kDLCUDA:
      STRATA_CHECK(d.device_id >= 0, InvalidArgumentError, "from_dlpack: CUDA device id {} is negative", d.device_id);
      return Device(DeviceType::CUDA, d.device_id);
    case kDLROCM:
      STRATA_CHECK(d.device_id >= 0, InvalidArgumentError, "from_dlpack: ROCm device id {} is negative", d.device_id);
      return Device(DeviceType::HIP, d.device_id);
    default:
      STRATA_THROW(InvalidArgumentError,
                   "from_dlpack: DLPack device type {} (id {}) is not supported; Strata takes kDLCPU (1), kDLCUDA (2) "
                   "and kDLROCM (10)",
                   type, d.device_id);
  }
}

}  // namespace

DLDevice to_dl_device(Device device) {
  return DLDevice{device.is_cpu() ? kDLCPU : device.is_hip() ? kDLROCM : kDLCUDA, device.index()};
}

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  STRATA_CHECK(tensor.defined(), InvalidArgumentError, "to_dlpack: the tensor is undefined");
  const Device device = tensor.device();
  auto exported = std::make_unique<Exported>();
  exported->storage = tensor.storage();
  exported->shape = tensor.shape().vec();
  exported->strides = tensor.strides().vec();
  DLTensor& dl = exported->managed.dl_tensor;
  // The pointer to the first element, with byte_offset 0, as PyTorch does.
  dl.data = tensor.numel() > 0 ? tensor.data_ptr() : nullptr;
  dl.device = to_dl_device(device);
  dl.ndim = static_cast<int32_t>(tensor.dim());
  dl.dtype = to_dl(tensor.dtype());
  dl.shape = exported->shape.data();
  dl.strides = exported->strides.data();
  dl.byte_offset = 0;
  exported->managed.manager_ctx = exported.get();
  exported->managed.deleter = delete_exported;
  return &exported.release()->managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  STRATA_CHECK(managed != nullptr, InvalidArgumentError, "from_dlpack: the DLManagedTensor is null");
  const DLTensor& dl = managed->dl_tensor;
  const DType dtype = from_dl(dl.dtype);
  const Device device = from_dl(dl.device);
  check_device(device);
  STRATA_CHECK(dl.ndim >= 0 && dl.ndim <= kMaxDims, InvalidArgumentError,
               "from_dlpack: ndim is {}; a tensor has between 0 and {} dimensions", dl.ndim, kMaxDims);
  STRATA_CHECK(dl.ndim == 0 || dl.shape != nullptr, InvalidArgumentError, "from_dlpack: shape is null for {} dims",
               dl.ndim);
  const auto dims_bytes = static_cast<std::size_t>(dl.ndim) * sizeof(int64_t);
  STRATA_CHECK(host_memory_readable(dl.shape, dims_bytes) &&
                   (dl.strides == nullptr || host_memory_readable(dl.strides, dims_bytes)),
               InvalidArgumentError,
               "from_dlpack: the shape or strides array of {} dims is not in readable memory of this process (Note "
               "[Checking a DLPack producer's host memory])",
               dl.ndim);
  Shape shape(dl.shape, dl.shape + dl.ndim);
  for (int64_t d : shape) {
    STRATA_CHECK(d >= 0, ShapeError, "from_dlpack: negative dimension {} in shape {}", d, shape);
  }
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  STRATA_CHECK(checked_span(shape, elem).has_value(), ShapeError,
               "from_dlpack: shape {} of {} is too large: its size in bytes does not fit in 64 bits", shape, dtype);
  // No strides means compact row-major.
  Strides strides = dl.strides != nullptr ? Strides(dl.strides, dl.strides + dl.ndim) : contiguous_strides(shape);
  // The elements the view can reach, from the first one, and their bytes.
  int64_t extent = numel(shape) > 0 ? 1 : 0;
  for (std::size_t i = 0; i < shape.size() && extent > 0; ++i) {
    STRATA_CHECK(strides[i] >= 0, InvalidArgumentError,
                 "from_dlpack: negative strides ({}) are not supported; make the tensor contiguous first",
                 fmt::join(strides, ", "));
    int64_t reach = 0;
    STRATA_CHECK(
        !__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) && !__builtin_add_overflow(extent, reach, &extent),
        InvalidArgumentError, "from_dlpack: shape {} with strides ({}) reaches further than 64-bit offsets can address",
        shape, fmt::join(strides, ", "));
  }
  int64_t nbytes = 0;
  STRATA_CHECK(!__builtin_mul_overflow(extent, elem, &nbytes), InvalidArgumentError,
               "from_dlpack: shape {} with strides ({}) of {} spans more bytes than fit in 64 bits", shape,
               fmt::join(strides, ", "), dtype);
  STRATA_CHECK(extent == 0 || dl.data != nullptr, InvalidArgumentError,
               "from_dlpack: data is null for a tensor of shape {} with elements", shape);
  // The producer vouches for the memory, but an address past the end of the address space is no memory: refuse a
  // byte_offset, or a span after it, that wraps around (forming that pointer would be undefined behaviour too).
  std::uintptr_t first = 0;
  std::uintptr_t end = 0;
  STRATA_CHECK(!__builtin_add_overflow(reinterpret_cast<std::uintptr_t>(dl.data), dl.byte_offset, &first) &&
                   !__builtin_add_overflow(first, static_cast<std::uintptr_t>(nbytes), &end),
               InvalidArgumentError,
               "from_dlpack: data + byte_offset ({} + {}) and the {} bytes after it wrap around the address space",
               dl.data, dl.byte_offset, nbytes);
  void* data = dl.data == nullptr ? nullptr : static_cast<char*>(dl.data) + dl.byte_offset;
  STRATA_CHECK(!device.is_cpu() || host_memory_readable(data, static_cast<std::size_t>(nbytes)), InvalidArgumentError,
               "from_dlpack: data + byte_offset ({} + {}) and the {} bytes after it are not all memory of this process "
               "(Note [Checking a DLPack producer's host memory])",
               dl.data, dl.byte_offset, nbytes);
  STRATA_CHECK(reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(elem) == 0, InvalidArgumentError,
               "from_dlpack: data + byte_offset ({} + {}) is not aligned to the {} bytes of a {} element", dl.data,
               dl.byte_offset, elem, dtype);
  auto imported = std::make_shared<Imported>();
  Storage& storage = imported->storage;
  storage.nbytes = static_cast<std::size_t>(nbytes);
  // A DataPtr without an owner frees nothing: the memory goes back through the producer's deleter, run by
  // ~Imported when the last tensor on this storage dies.
  storage.data = DataPtr(data, storage.nbytes, device, nullptr, nullptr);
  storage.device = device;
  imported->managed = managed;  // from here on we own it
  std::shared_ptr<Storage> shared(imported, &imported->storage);
  return Tensor(std::move(shared), dtype, std::move(shape), std::move(strides), 0);
}

}  // namespace strata::io
