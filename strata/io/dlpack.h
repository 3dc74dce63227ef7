#pragma once

#include <dlpack/dlpack.h>

#include "strata/tensor/tensor.h"

namespace strata::io {

// Note [DLPack ownership]
// to_dlpack hands out a DLManagedTensor that holds a reference to the tensor's storage: the memory stays valid,
// whatever happens to the Strata tensor, until the consumer calls the deleter (exactly once). from_dlpack takes
// ownership of a producer's DLManagedTensor on success: the new tensor wraps the memory without copying, and the
// producer's deleter runs when the last tensor or view on that memory dies. If from_dlpack throws, the caller still
// owns the DLManagedTensor. A CUDA tensor's memory may still be written by work queued on its stream; as with any
// DLPack exchange, the consumer must order its reads after that work (e.g. synchronize the device first).

/// DLPack's name for `device`: kDLCPU, kDLCUDA or kDLROCM (for hip), with its index.
DLDevice to_dl_device(Device device);

/// A DLPack view of `tensor` (kDLCPU, kDLCUDA or kDLROCM; shape and strides in elements). Bool uses code 6 (kDLBool of
/// DLPack >= 0.8). The caller must call the result's deleter.
DLManagedTensor* to_dlpack(const Tensor& tensor);

/// A tensor on the memory of `managed`, without a copy (see Note [DLPack ownership]). Throws DTypeError for types
/// Strata lacks (complex, lanes > 1, ...), InvalidArgumentError for devices it does not know or negative strides,
/// DeviceUnavailableError for a CUDA tensor when CUDA is unusable here.
Tensor from_dlpack(DLManagedTensor* managed);

}  // namespace strata::io
