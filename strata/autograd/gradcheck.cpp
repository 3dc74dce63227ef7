#include "strata/autograd/gradcheck.h"

#include <cmath>
#include <random>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"

namespace strata::autograd {

namespace {

double project(const Tensor& out, const std::vector<double>& v) {
  const auto values = out.to_vector<double>();
  double s = 0;
  for (std::size_t i = 0; i < values.size(); ++i) s += values[i] * v[i];
  return s;
}

// A copy of `t` on its device with element i (row-major) moved by delta; requires_grad off.
Tensor perturbed(const Tensor& t, int64_t i, double delta) {
  Tensor host = t.detach().to(kCPU).to(DType::F64).contiguous().clone();
  host.data<double>()[i] += delta;
  return host.to(t.dtype()).to(t.device());
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          double eps, double atol, double rtol) {
  for (const Tensor& t : inputs) {
    STRATA_CHECK(!t.requires_grad() || t.dtype() == DType::F64, DTypeError,
                 "gradcheck: inputs that require grad must be f64 for finite differences to be meaningful, got {}",
                 t.dtype());
  }
  // Analytical: backward of v·f(x).
  const Tensor out = f(inputs);
  std::mt19937_64 rng(1234);
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<std::size_t>(out.numel()));
  for (double& x : v) x = normal(rng);
  for (Tensor handle : inputs) {  // handles share their tensor's state: clearing the copy clears the input
    if (handle.requires_grad()) handle.set_grad(Tensor());
  }
  out.backward(tensor<double>(v, out.shape(), out.device()).to(out.dtype()));

  GradcheckResult result{true, 0, "all gradients match"};
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    const std::vector<double> analytical =
        x.grad().defined() ? x.grad().to_vector<double>() : std::vector<double>(static_cast<std::size_t>(x.numel()), 0.0);
    NoGradGuard no_grad;
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      plus[k] = perturbed(x, i, eps);
      minus[k] = perturbed(x, i, -eps);
      const double numerical = (project(f(plus), v) - project(f(minus), v)) / (2 * eps);
      const double a = analytical[static_cast<std::size_t>(i)];
      const double error = std::abs(numerical - a);
      if (error > result.max_abs_error) result.max_abs_error = error;
      if (error > atol + rtol * std::abs(numerical) && result.ok) {
        result.ok = false;
        result.report = fmt::format("input {} element {}: numerical {} vs analytical {} (error {})", k, i, numerical, a,
                                    error);
      }
    }
  }
  return result;
}

}  // namespace strata::autograd
