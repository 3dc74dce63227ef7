#pragma once

// The cross-device cases: every op on a device, compared with the CPU on the same inputs (ggml's test-backend-ops
// idea). Shared by the CrossDevice suite (cross_device_test.cpp) and by the op-coverage test
// (op_coverage_test.cpp), which runs them again while the op table counts the kernels they reach.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "strata/nn/functional.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"

namespace strata::testing {

struct OpCase {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> run;
};

/// Every case; a new op adds one here (docs/architecture.md, "How to add an op").
inline std::vector<OpCase> op_cases() {
  using V = const std::vector<Tensor>&;
  const auto idx = [](V x) { return x[3]; };
  return {
      {"add", [](V x) { return add(x[0], x[1], 0.5); }},
      {"sub_broadcast", [](V x) { return sub(x[0], x[2]); }},
      {"mul", [](V x) { return mul(x[0], x[1]); }},
      {"div", [](V x) { return div(x[0], add(abs(x[1]), abs(x[2]) + 1.0)); }},
      {"pow", [](V x) { return pow(abs(x[0]), 1.5); }},
      {"unary_chain", [](V x) { return sigmoid(tanh(exp(neg(x[0])))); }},
      {"log_sqrt_rsqrt", [](V x) { return add(log(abs(x[0]) + 1.0), sqrt(abs(x[1])) * rsqrt(abs(x[1]) + 1.0)); }},
      {"relu_gelu_clamp", [](V x) { return add(relu(x[0]), clamp(gelu(x[1]), Scalar(-0.5), Scalar(0.5))); }},
      {"where_compare", [](V x) { return where(gt(x[0], x[1]), x[0], x[1]); }},
      {"maximum_minimum", [](V x) { return maximum(x[0], minimum(x[1], x[2])); }},
      {"transposed_input", [](V x) { return (x[0].t() * 2.0).contiguous(); }},
      {"sum_mean", [](V x) { return add(sum(x[0], {1}), mean(x[1], {1})); }},
      {"max_min", [](V x) { return sub(max(x[0], {0}), min(x[1], {0})); }},
      {"argmax", [](V x) { return argmax(x[0], 1).to(DType::F32); }},
      {"var_norm", [](V x) { return add(var(x[0], {1}), norm(x[1], 2.0, {1})); }},
      {"logsumexp", [](V x) { return logsumexp(x[0], {1}); }},
      {"softmax", [](V x) { return softmax(x[0], 1); }},
      {"log_softmax", [](V x) { return log_softmax(x[1], 0); }},
      {"matmul", [](V x) { return matmul(x[0], x[1].t()); }},
      {"addmm", [](V x) { return addmm(x[2].narrow(0, 0, 8), x[0], x[1].t(), 0.5, 2.0); }},
      {"index_select", [idx](V x) { return index_select(x[0], 0, idx(x)); }},
      {"gather", [idx](V x) { return gather(x[0], 1, idx(x).reshape({1, 4}).expand({8, 4}).contiguous()); }},
      {"scatter_add", [idx](V x) {
         const Tensor index = idx(x).reshape({4, 1}).expand({4, 16}).contiguous();
         return scatter_add(zeros_like(x[0]), 0, index, x[1].narrow(0, 0, 4).contiguous());
       }},
      {"cat_stack", [](V x) { return cat({x[0], stack({x[1].select(0, 0), x[1].select(0, 1)})}, 0); }},
      {"to_f16_and_back", [](V x) { return x[0].to(DType::F16).to(DType::F32); }},
      {"compare_logical", [](V x) {
         const Tensor a = logical_and(le(x[0], x[1]), ne(x[0], x[1]));
         const Tensor b = logical_xor(eq(x[0], x[0]), logical_or(logical_not(a), eq(x[1], x[2])));
         return add(a.to(DType::F32), b.to(DType::F32), 2.0);
       }},
      {"scalar_on_the_left", [](V x) { return (1.0 - x[0]) + 2.0 / (abs(x[1]) + 1.0) + x[0] / 4.0; }},
      {"one_hot", [idx](V x) { return one_hot(idx(x), 8).to(DType::F32); }},
      {"factories", [](V x) {
         const Device d = x[0].device();
         const Tensor a = arange(0, 16, 1, TensorOptions().device(d)).to(DType::F32);
         return add(a + linspace(-1.0, 1.0, 16, TensorOptions().device(d)), eye(16, 16, TensorOptions().device(d)));
       }},
      {"pooling", [](V x) {
         const Tensor in = x[0].reshape({2, 1, 4, 16});
         const Tensor a = nn::functional::max_pool2d(in, 2).flatten();
         const Tensor b = nn::functional::avg_pool2d(in, 2).flatten();
         return cat({a, b, nn::functional::adaptive_avg_pool2d(in, {2, 4}).flatten()}, 0);
       }},
      {"pow_tensor", [](V x) { return pow(abs(x[0]) + 0.5, x[1]); }},
      {"relu_and_pooling_backward", [](V x) {
         // The gradient of relu and of the three poolings: their backward kernels run on the inputs' device.
         Tensor in = x[0].reshape({2, 1, 4, 16}).detach();
         in.requires_grad_();
         const Tensor pooled = cat({nn::functional::max_pool2d(relu(in), 2).flatten(),
                                    nn::functional::avg_pool2d(in, 2).flatten(),
                                    nn::functional::adaptive_avg_pool2d(in, {2, 4}).flatten()}, 0);
         sum(mul(pooled, pooled), {0}).backward();
         return in.grad().flatten();
       }},
      {"conv2d_and_backward", [](V x) {
         // The convolution (with its fused ReLU) and its three gradients, on the vendor library where there is one.
         Tensor in = x[0].reshape({2, 4, 4, 4}).detach(), weight = x[1].reshape({8, 4, 2, 2}).detach();
         Tensor bias = x[2].narrow(0, 0, 8).detach();
         for (Tensor* t : {&in, &weight, &bias}) t->requires_grad_();
         const Tensor out = nn::functional::conv2d(in, weight, bias, 1, 1);
         const Tensor fused = nn::functional::conv2d_relu(in, weight, bias, 2, 0);
         sum(mul(out, out)).backward();
         return cat({out.flatten(), fused.flatten(), in.grad().flatten(), weight.grad().flatten(),
                     bias.grad().flatten()}, 0);
       }},
      {"transformer_elementwise", [](V x) {
         // The Transformers' elementwise ops: sin, cos, erf, GELU in both forms, masked_fill and the triangles, and the
         // derivative kernels of the GELUs.
         Tensor in = x[0].detach();
         in.requires_grad_();
         const Tensor a = add(sin(x[0]), mul(cos(x[1]), erf(x[2])));
         const Tensor b = add(add(gelu(in, "tanh"), gelu(in)), masked_fill(x[1], gt(x[0], x[2]), -2.0));
         const Tensor out = add(add(a, b), add(triu(x[0], 1), tril(x[1], -2)));
         sum(out).backward();
         return cat({out.detach().flatten(), in.grad().flatten()}, 0);
       }},
      {"topk", [](V x) {
         auto [values, indices] = topk(x[0], 3, 1);
         auto [smallest, where] = topk(x[1], 2, 0, false);
         return cat({values.flatten(), indices.to(DType::F32).flatten(), smallest.flatten(),
                     where.to(DType::F32).flatten()}, 0);
       }},
      {"multinomial", [](V x) {
         // Each row draws from Philox blocks of its own (Note [Sampling from rows of weights]): the CPU's samples
         // for the same generator state. abs and add are exact, so the weights are the same on both devices too.
         const Tensor weights = abs(x[0]) + 0.1;
         Generator generator(20261127);
         const Tensor with = multinomial(weights, 6, true, &generator);
         const Tensor without = multinomial(weights, 5, false, &generator);
         return cat({with.flatten(), without.flatten()}, 0).to(DType::F32);
       }},
      {"attention_and_backward", [](V x) {
         // The fused attention, plain, causal with dropout (Philox: the CPU's mask) and with a boolean mask, and
         // its backward kernel. The generator's state is put back for the cases after this one.
         namespace F = nn::functional;
         Tensor q = x[0].reshape({2, 4, 16}).detach(), k = x[1].reshape({2, 4, 16}).detach();
         Tensor v = x[1].reshape({2, 4, 16}).narrow(2, 0, 5).contiguous().detach();
         for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
         Generator& generator = default_generator(q.device());
         const GeneratorState before = generator.state();
         generator.manual_seed(20261127);
         const Tensor a = F::scaled_dot_product_attention(q, k, v);
         const Tensor b = F::scaled_dot_product_attention(q, k, v, {}, 0.3, true);
         const Tensor c = F::scaled_dot_product_attention(q, k, v, gt(x[2].narrow(0, 0, 4), x[2].narrow(0, 4, 4)));
         generator.set_state(before);
         const Tensor out = cat({a.flatten(), b.flatten(), c.flatten()}, 0);
         sum(mul(out, out)).backward();
         return cat({out.detach(), q.grad().flatten(), k.grad().flatten(), v.grad().flatten()}, 0);
       }},
      {"layer_norm_and_backward", [](V x) {
         // The fused layer_norm with weight and bias over the last dim of [8, 16], without them over the last two
         // dims of [2, 4, 16], and its backward kernel (grad_x, grad_weight, grad_bias).
         namespace F = nn::functional;
         Tensor in = x[0].detach(), w = x[2].detach(), b = (x[2] * 0.5).detach();
         for (Tensor* t : {&in, &w, &b}) t->requires_grad_();
         const Tensor a = F::layer_norm(in, {16}, w, b);
         const Tensor c = F::layer_norm(in.reshape({2, 4, 16}), {4, 16});
         const Tensor out = cat({a.flatten(), c.flatten()}, 0);
         sum(mul(out, cat({x[1].flatten(), x[1].flatten()}, 0))).backward();
         return cat({out.detach(), in.grad().flatten(), w.grad(), b.grad()}, 0);
       }},
      {"random", [](V x) {
         // The device's own generator, seeded alike on every device: Philox gives the CPU's values bit for bit
         // (Note [Random numbers on every device]). The generator's state is put back for the cases after this one.
         const Device d = x[0].device();
         Generator& generator = default_generator(d);
         const GeneratorState before = generator.state();
         generator.manual_seed(20261126);
         const Tensor u = rand({37}, TensorOptions().device(d));
         const Tensor n = randn({3, 5}, TensorOptions().device(d).dtype(DType::F64)).to(DType::F32);
         const Tensor i = randint(-4, 9, {11}, TensorOptions().device(d).dtype(DType::I64)).to(DType::F32);
         generator.set_state(before);
         return cat({u, n.flatten(), i}, 0);
       }},
  };
}

/// The inputs every case takes: two matrices, a vector that broadcasts against them, and indices.
inline std::vector<Tensor> cross_device_inputs() {
  return {randn({8, 16}), randn({8, 16}), randn({16}), tensor<int64_t>({5, 0, 7, 2})};
}

/// Runs `op` on `host` (CPU) and on `moved` (the same values on `device`) and expects the same values on `device`.
inline void expect_matches_cpu(const OpCase& op, const std::vector<Tensor>& host, const std::vector<Tensor>& moved,
                               Device device) {
  SCOPED_TRACE(op.name);
  const auto expected = op.run(host).to_vector<float>();
  const Tensor got_tensor = op.run(moved);
  EXPECT_EQ(got_tensor.device(), device);
  const auto got = got_tensor.to_vector<float>();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-4 + 1e-4 * std::abs(expected[i])) << "element " << i;
  }
}

}  // namespace strata::testing
