#pragma once

// Note [One source for NVIDIA and AMD]
// The portable kernels (backends/portable), kernels/launch.h and the GPU backend (backends/cuda) are written once,
// against CUDA's runtime API. The HIP plugin (backends/hip) compiles the same files with hipcc and
// STRATA_GPU_HIP=1, and this header maps CUDA's names to HIP's, which HIP was designed to allow: a page of defines,
// no code. Device-pass and compiler tests use STRATA_DEVICE_PASS and STRATA_GPU_COMPILER (core/macros.h) rather than
// __CUDA_ARCH__ and __CUDACC__. kGpuType is the device type such a file registers its kernels and backend for.
// What CUDA has and HIP lacks here has no define, so it fails to compile rather than misbehave: cuBLAS, cuDNN and
// NCCL stay in files the HIP plugin does not build (backends/hip/CMakeLists.txt).

#include "strata/core/device.h"

#if defined(STRATA_GPU_HIP)
#include <hip/hip_runtime.h>

#define STRATA_GPU_TYPE HIP

#define cudaDeviceCanAccessPeer hipDeviceCanAccessPeer
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceProp hipDeviceProp_t
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaError_t hipError_t
#define cudaErrorCudartUnloading hipErrorDeinitialized
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNotReady hipErrorNotReady
#define cudaEvent_t hipEvent_t
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDefault hipEventDefault
#define cudaEventDestroy hipEventDestroy
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventQuery hipEventQuery
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaFree hipFree
#define cudaFreeHost hipHostFree
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocPortable hipHostMallocPortable
#define cudaMalloc hipMalloc
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemcpyPeerAsync hipMemcpyPeerAsync
#define cudaMemGetInfo hipMemGetInfo
#define cudaMemsetAsync hipMemsetAsync
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaSetDevice hipSetDevice
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamQuery hipStreamQuery
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaSuccess hipSuccess
// HIP 5.2 has no handle for the legacy stream; its null stream is that stream (it orders the blocking streams).
#define cudaStreamLegacy static_cast<hipStream_t>(nullptr)

#else
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif

#define STRATA_GPU_TYPE CUDA
#endif

namespace strata {

/// The device type of the GPU this file is compiled for: CUDA, or HIP in the HIP plugin.
inline constexpr DeviceType kGpuType = DeviceType::STRATA_GPU_TYPE;
/// The runtime's name in messages: "CUDA" or "HIP".
inline constexpr const char* kGpuRuntime = kGpuType == DeviceType::HIP ? "HIP" : "CUDA";

}  // namespace strata
