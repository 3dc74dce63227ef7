// The GPU's attention kernels (backends/portable/attention_ops.h, block kernels) run here on the CPU's block
// emulation and are held to the CPU backend's fused kernel: outputs, log-sum-exp through the backward pass, and the
// three gradients, with masks, causal masking, dropout and head dims that shrink the tiles. No GPU is needed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "strata/backends/portable/attention_ops.h"
#include "strata/nn/functional.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/random.h"

namespace strata {
namespace {

namespace F = nn::functional;

struct Case {
  int64_t B, L, S, E, Ev;
  bool causal;
  int mask;  // 0 none, 1 bool [L, S], 2 additive [B, 1, S]
  double dropout;
  DType dtype;
};

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to(DType::F64).to_vector<double>(), w = want.to(DType::F64).to_vector<double>();
  for (std::size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], w[i], tol * (1.0 + std::abs(w[i]))) << what << ", element " << i;
  }
}

void check(const Case& c) {
  const std::string what = fmt::format("B {} L {} S {} E {} Ev {} causal {} mask {} dropout {} {}", c.B, c.L, c.S, c.E,
                                       c.Ev, c.causal, c.mask, c.dropout, c.dtype);
  const TensorOptions o = TensorOptions(c.dtype);
  Tensor q = randn({c.B, c.L, c.E}, o), k = randn({c.B, c.S, c.E}, o), v = randn({c.B, c.S, c.Ev}, o);
  const Tensor up = randn({c.B, c.L, c.Ev}, o);
  Tensor mask;
  if (c.mask == 1) {
    mask = logical_or(gt(rand({c.L, c.S}), scalar_tensor(0.5)), lt(rand({c.L, 1}), scalar_tensor(0.1)));
  } else if (c.mask == 2) {
    mask = randn({c.B, 1, c.S}, o);
  }
  // The CPU backend's kernel through the front end (its gradients through autograd).
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
  constexpr std::uint64_t kSeed = 77;
  default_generator(kCPU).manual_seed(kSeed);
  const Tensor want = F::scaled_dot_product_attention(q, k, v, mask, c.dropout, c.causal);
  want.backward(up);

  // The block kernels on the same views, with the parameters the front end passes.
  ops::AttentionParams p;
  p.batch = c.B;
  p.L = c.L;
  p.S = c.S;
  p.E = c.E;
  p.Ev = c.Ev;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.E));
  p.causal = c.causal;
  p.dropout_p = c.dropout;
  p.seed = kSeed;  // a fresh seed's stream starts at offset 0
  Tensor expanded;
  if (mask.defined()) {
    expanded = mask.expand({c.B, c.L, c.S});
    p.mask_kind = mask.dtype() == DType::Bool ? ops::AttentionMask::kBool : ops::AttentionMask::kAdditive;
    p.mask_batch_dims = 1;
    p.mask_batch_sizes[0] = c.B;
    p.mask_batch_strides[0] = expanded.stride(0);
    p.mask_row_stride = expanded.stride(1);
    p.mask_col_stride = expanded.stride(2);
  }
  const TensorView mv = expanded.defined() ? expanded.view() : TensorView{};
  Tensor out = empty({c.B, c.L, c.Ev}, o), lse = empty({c.B, c.L}, o);
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  portable::attention_blocks_forward(detail::op_call("scaled_dot_product_attention", kCPU), out.view(), lse.view(),
                                     qd.view(), kd.view(), vd.view(), mv, p);
  const double tol = c.dtype == DType::F64 ? 1e-10 : 2e-5;
  expect_close(out, want.detach(), tol, what + ": output");
  Tensor gq = empty(q.shape(), o), gk = empty(k.shape(), o), gv = empty(v.shape(), o);
  portable::attention_blocks_backward(detail::op_call("scaled_dot_product_attention_backward", kCPU), gq.view(),
                                      gk.view(), gv.view(), up.view(), qd.view(), kd.view(), vd.view(), out.view(),
                                      lse.view(), mv, p);
  expect_close(gq, q.grad(), 5 * tol, what + ": grad q");
  expect_close(gk, k.grad(), 5 * tol, what + ": grad k");
  expect_close(gv, v.grad(), 5 * tol, what + ": grad v");
}

TEST(AttentionBlockKernels, MatchTheCpuKernel) {
  manual_seed(3);
  const std::vector<Case> cases = {
      {2, 5, 7, 4, 3, false, 0, 0.0, DType::F32},   {1, 70, 90, 8, 5, true, 0, 0.0, DType::F32},
      {2, 33, 20, 3, 2, false, 1, 0.0, DType::F32}, {3, 17, 66, 5, 4, false, 2, 0.0, DType::F32},
      {2, 40, 40, 6, 6, true, 0, 0.25, DType::F32}, {1, 9, 12, 100, 70, false, 0, 0.0, DType::F32},
      {2, 21, 19, 4, 3, false, 1, 0.3, DType::F64}, {1, 70, 30, 2, 1, true, 0, 0.0, DType::F64},
  };
  for (const Case& c : cases) check(c);
}

}  // namespace
}  // namespace strata
