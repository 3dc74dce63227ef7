#pragma once

// The floor of the CPU's convolutions (Note [The convolution floor] in conv_floor.cpp): oneDNN's own primitives for
// the reference network's two convolutions, called directly, against which strata-bench's conv workload sets
// Strata's time.

#include <memory>
#include <string>

namespace strata::bench {

/// One layer's shape: [n, c, h, w] * [o, c, 3, 3], stride 1, pad 1, with bias.
struct ConvFloorShape {
  int64_t n, c, h, w, o;
  bool backward_data;  // whether the input's gradient is asked (not for a network's first layer)
};

/// oneDNN's forward, backward-data and backward-weights primitives of one layer, each in the layouts and with the
/// algorithm oneDNN runs fastest, every buffer made once. Null where strata-bench was built without oneDNN.
class OneDnnConvFloor {
 public:
  static std::unique_ptr<OneDnnConvFloor> make(const ConvFloorShape& shape);
  virtual ~OneDnnConvFloor() = default;
  virtual void forward() = 0;
  /// Forward, then the gradients the layer asks for (input, weight and bias).
  virtual void forward_backward() = 0;
  /// The implementations chosen, pass by pass (DNNL_VERBOSE's names), e.g. "fwd jit:avx2, bwd_d ..., bwd_w ...".
  virtual std::string describe() const = 0;
};

}  // namespace strata::bench
