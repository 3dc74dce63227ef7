#pragma once

// Marks functions that are compiled for the host and, in GPU translation units (nvcc for NVIDIA, hipcc for AMD),
// for the device too. STRATA_GPU_COMPILER is defined in GPU translation units, and STRATA_DEVICE_PASS in their
// device-side pass only, where CUDA code would test __CUDACC__ and __CUDA_ARCH__ (Note [One source for NVIDIA and
// AMD] in kernels/gpu_vendor.h).
#if defined(__CUDACC__) || defined(__HIPCC__)
#define STRATA_HOST_DEVICE __host__ __device__
#define STRATA_GPU_COMPILER 1
#else
#define STRATA_HOST_DEVICE
#endif
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define STRATA_DEVICE_PASS 1
#endif

// Copies an object's bytes in host and device code alike (a bit cast of unrelated types): clang refuses the
// host-only std::memcpy in a __host__ __device__ function, and the builtin compiles everywhere.
#define STRATA_BIT_COPY(dst, src, bytes) __builtin_memcpy((dst), (src), (bytes))

#define STRATA_EXPORT __attribute__((visibility("default")))
