#pragma once

// The public API of Strata in one header: #include <strata/strata.h>.
// (The portable kernel API, <strata/kernels/launch.h>, is included separately by files that write kernels.)

// core
#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/error.h"
#include "strata/core/half.h"
#include "strata/core/scalar.h"
#include "strata/core/shape.h"

// runtime
#include "strata/runtime/allocator.h"
#include "strata/runtime/backend.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/memory_limit.h"
#include "strata/runtime/memory_stats.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/pinned.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/transfer.h"

// tensor
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "strata/tensor/tensor.h"

// autograd
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/gradcheck.h"

// data and io
#include "strata/data/dataloader.h"
#include "strata/data/dataset.h"
#include "strata/data/fashion_mnist.h"
#include "strata/data/idx.h"
#include "strata/data/transforms.h"
#include "strata/io/dlpack.h"
#include "strata/io/safetensors.h"
