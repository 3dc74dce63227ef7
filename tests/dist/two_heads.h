#pragma once

// A model for DDP's tests of parameters a pass did not use (dist_test.cpp in one process, mpi_main.cpp under mpirun).

#include <memory>

#include "strata/nn/layers.h"
#include "strata/tensor/functions.h"

namespace strata::testing {

// Two heads on one body; forward runs one of them, so the other's parameters get no gradient in that pass.
class TwoHeads : public nn::Layer {
 public:
  TwoHeads() : Layer("TwoHeads") {
    body = register_module("body", std::make_shared<nn::Linear>(6, 8));
    a = register_module("a", std::make_shared<nn::Linear>(8, 3));
    b = register_module("b", std::make_shared<nn::Linear>(8, 3));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = relu((*body)(x));
    return use_b ? (*b)(h) : (*a)(h);
  }
  std::shared_ptr<nn::Linear> body, a, b;
  bool use_b = false;
};

}  // namespace strata::testing
