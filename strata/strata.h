#pragma once

// The public API of Strata in one header: #include <strata/strata.h>.
// Each layer lists its public headers below; a new layer (nn/, optim/, dist/, ...) adds its headers here.
// Left out on purpose: the portable kernel API (strata/kernels/*.h, runtime/kernel_assert.h), which files that
// write kernels include themselves, and internal headers that only the library and backends use (core/macros.h,
// core/tensor_view.h, runtime/plugin.h, runtime/memory_report.h, runtime/environment.h, runtime/stream_uses.h,
// runtime/thread_cache.h, ops/* but ops/op_support.h, backends/*, tensor/op_call.h, tensor/op_checks.h,
// tensor/grad_hook.h, tensor/autograd_support.h, nn/blocked.h, data/sampling.h, data/idx_detail.h, io/file.h,
// io/digest.h, io/safetensors_header.h, dist/agreement.h, the internals of jit/). tests/strata_header_test.cpp
// compiles this header alone.

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
#include "strata/runtime/collectives.h"
#include "strata/runtime/cpu_devices.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/memory_limit.h"
#include "strata/runtime/memory_stats.h"
#include "strata/runtime/op_scope.h"
#include "strata/runtime/parallel.h"
#include "strata/runtime/pinned.h"
#include "strata/runtime/profiler.h"
#include "strata/runtime/registry.h"
#include "strata/runtime/stream.h"
#include "strata/runtime/sync_debug.h"
#include "strata/runtime/transfer.h"

// ops: only the query of what a device type supports
#include "strata/ops/op_support.h"

// tensor
#include "strata/tensor/autocast.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/print.h"
#include "strata/tensor/random.h"
#include "strata/tensor/tensor.h"

// autograd
#include "strata/autograd/grad_mode.h"
#include "strata/autograd/gradcheck.h"
#include "strata/autograd/node.h"

// nn and optim
#include "strata/nn/attention.h"
#include "strata/nn/clip_grad.h"
#include "strata/nn/functional.h"
#include "strata/nn/functional_options.h"
#include "strata/nn/init.h"
#include "strata/nn/layers.h"
#include "strata/nn/module.h"
#include "strata/optim/adam.h"
#include "strata/optim/grad_scaler.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/optim/optimizer.h"
#include "strata/optim/sgd.h"

// data and io
#include "strata/data/dataloader.h"
#include "strata/data/dataset.h"
#include "strata/data/distributed_sampler.h"
#include "strata/data/fashion_mnist.h"
#include "strata/data/idx.h"
#include "strata/data/transforms.h"
#include "strata/io/dlpack.h"
#include "strata/io/safetensors.h"
#include "strata/io/summary_writer.h"

// dist: process groups, data-parallel training, and groups over a device type's collective library
#include "strata/dist/ddp.h"
#include "strata/dist/device_collectives.h"
#include "strata/dist/process_group.h"

// kernels compiled at run time (jit/source.h, jit/cpu_dialect.h, jit/kernel_cache.h and jit/gpu_dialect.h are
// internal)
#include "strata/jit/jit.h"
