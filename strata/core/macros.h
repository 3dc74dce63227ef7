#pragma once

// Marks functions that are compiled for the host and, in CUDA translation units, for the device too.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define STRATA_HOST_DEVICE __host__ __device__
#define STRATA_DEVICE_COMPILE 1
#else
#define STRATA_HOST_DEVICE
#endif

#define STRATA_EXPORT __attribute__((visibility("default")))
