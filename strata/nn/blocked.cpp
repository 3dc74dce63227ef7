#include "strata/nn/blocked.h"

#include "strata/core/error.h"
#include "strata/ops/dnn_kernels.h"
#include "strata/tensor/op_call.h"

namespace strata::nn::blocked {

// Note [Activations in oneDNN's blocked layout]
// oneDNN's direct convolutions work on channel-blocked activations, nChw8c with AVX2 and nChw16c with AVX-512: [N,
// C/b, H, W, b], b channels of a pixel side by side. Between NCHW layers each convolution pays a reorder of its
// input in, of its output out, and in backward of grad_output in and grad_input out (Note [oneDNN convolution
// primitives]). So a fused Sequential (Note [Fusing a Sequential's layers]) keeps a run of Conv2d, ReLU, MaxPool2d
// triples in the blocked layout of the device's backend (block_size; 0 where it has none, as on GPUs) whenever
// every convolution's output channels fill whole blocks: the first convolution reads NCHW and writes blocked, the
// pooling and the ReLU work on blocked tensors, the next convolution reads them as they are, and the run's last
// pooling writes NCHW, a quarter of what a reorder of the convolution's output would read. A blocked activation is
// an ordinary contiguous 5-D tensor, so autograd, the caching allocator and the layout-blind ops (ReLU, its mask,
// gradient accumulation) need nothing new; only convolution and max pooling have blocked entries (Note [The DNN
// kernel contract]), registered where oneDNN is. The values are the NCHW path's: the same primitives run on the
// same layouts and pooling picks the same maxima, bit for bit; only the first layer's weight and bias gradients,
// whose GEMM (Note [Weight gradients of thin convolutions]) reads grad_output a block at a time instead of relaying
// it out, differ by rounding (bounded in Note [Fusing a Sequential's layers]; tests/nn/blocked_test.cpp). Outside
// a fused Sequential nothing is blocked: layers called one by one, and every op a user calls, see NCHW. What it
// saves is in docs/benchmarks.md, "Measurements behind the CPU decisions".

int64_t block_size(Device device, DType dtype) {
  static const ops::KernelSlot<ops::ConvBlockFn> slot("conv2d_block_size");
  if (dtype != DType::F32 || !slot.has(device.type())) return 0;
  return slot.get(device)(strata::detail::op_call("conv2d_block_size", device));
}

Shape nchw_shape(const char* op, const Tensor& t, int64_t block) {
  if (block == 0) return t.shape();
  STRATA_CHECK(t.dim() == 5 && t.size(4) == block, ShapeError,
               "{}: expected a blocked activation [N, C/{}, H, W, {}], got shape {}", op, block, block, t.shape());
  return {t.size(0), t.size(1) * block, t.size(2), t.size(3)};
}

}  // namespace strata::nn::blocked
