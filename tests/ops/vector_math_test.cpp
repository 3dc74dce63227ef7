// The f32 transcendental kernels of the CPU (exp, tanh, erf, sin, cos and GELU's derivatives), which call libm's
// vector variants where the compiler vectorises them (Note [Vector math from libmvec] in
// backends/portable/elementwise_math.h): on a dense grid, every value within a few ulp of the f64 result, and the
// special values as libm's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata {
namespace {

constexpr int64_t kPoints = 200'001;

/// The largest error of `got` against `want` in units of the f32 spacing at want (the spacing at 2^-30 at least, so
/// that results near zero are held to an absolute error instead); `where` gets its index.
double max_ulps(const std::vector<float>& got, const std::vector<double>& want, std::size_t* where) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ulp = std::max(std::ldexp(1.0, std::ilogb(std::max(std::abs(want[i]), 0x1p-30)) - 23), 0x1p-53);
    const double e = std::abs(static_cast<double>(got[i]) - want[i]) / ulp;
    if (e > worst) {
      worst = e;
      *where = i;
    }
  }
  return worst;
}

struct Case {
  std::string name;
  Tensor (*run)(const Tensor&);
  double (*ref)(double);
  double range;
};

TEST(VectorMath, F32TranscendentalsStayWithinAFewUlp) {
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, 80.0},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, 12.0},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double v) { return std::erf(v); }, 6.0},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double v) { return std::sin(v); }, 1e4},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double v) { return std::cos(v); }, 1e4},
  };
  for (const Case& c : cases) {
    const Tensor x = linspace(-c.range, c.range, kPoints);  // f32
    const std::vector<float> in = x.to_vector<float>(), got = c.run(x).to_vector<float>();
    std::vector<double> want(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) want[i] = c.ref(in[i]);
    std::size_t at = 0;
    EXPECT_LE(max_ulps(got, want, &at), 4.0) << c.name << " at " << in[at] << ": " << got[at] << " vs " << want[at];
  }
}

TEST(VectorMath, GeluDerivativesMatchTheirF64Formulas) {
  // The exact form crosses zero near x = -0.75, where its terms cancel: held to 2e-7 absolute there. The tanh form
  // forms 1 - t^2 from t = tanh(...) near -1 for x < -4, where 1 ulp of t moves the result by ~1e-6 (as much with
  // libm's scalar tanhf: 1.6e-6 at x = -5.16): held to 4e-6 absolute.
  const auto derivative = [](const char* approximate) {
    Tensor x = linspace(-8.0, 8.0, kPoints);
    x.requires_grad_();
    sum(gelu(x, approximate)).backward();  // the gelu_backward kernel with an incoming gradient of 1
    return x.grad().to_vector<float>();
  };
  const std::vector<float> in = linspace(-8.0, 8.0, kPoints).to_vector<float>();
  const std::vector<float> exact = derivative("none"), tanh_form = derivative("tanh");
  double worst_exact = 0, worst_tanh = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double v = in[i];
    const double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0))), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (v + 0.044715 * v * v * v));
    const double tanh_want = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
    worst_exact = std::max(worst_exact, std::abs(exact[i] - (cdf + v * pdf)) / (2e-7 + 4e-7 * std::abs(cdf + v * pdf)));
    worst_tanh = std::max(worst_tanh, std::abs(tanh_form[i] - tanh_want) / (4e-6 + 4e-7 * std::abs(tanh_want)));
  }
  EXPECT_LE(worst_exact, 1.0);
  EXPECT_LE(worst_tanh, 1.0);
}

TEST(VectorMath, SpecialValuesAreLibms) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Eight values, so that they go through the vector loop as well as its scalar tail.
  const Tensor x = tensor<float>({nan, inf, -inf, 0.0f, -0.0f, 100.0f, -100.0f, 1e30f});
  const auto e = exp(x).to_vector<float>(), t = tanh(x).to_vector<float>(), f = erf(x).to_vector<float>();
  const auto s = sin(x).to_vector<float>(), c = cos(x).to_vector<float>();
  EXPECT_TRUE(std::isnan(e[0]) && std::isnan(t[0]) && std::isnan(f[0]) && std::isnan(s[0]) && std::isnan(c[0]));
  EXPECT_EQ(e[1], inf);
  EXPECT_EQ(e[2], 0.0f);
  EXPECT_EQ(e[5], inf);
  EXPECT_EQ(e[3], 1.0f);
  EXPECT_EQ((std::vector<float>{t[1], t[2], t[5], t[6]}), (std::vector<float>{1, -1, 1, -1}));
  EXPECT_EQ((std::vector<float>{f[1], f[2], f[7]}), (std::vector<float>{1, -1, 1}));
  EXPECT_TRUE(std::signbit(f[4]) && std::signbit(s[4]) && std::signbit(t[4]));
  EXPECT_TRUE(std::isnan(s[1]) && std::isnan(c[2]));
  EXPECT_EQ(c[3], 1.0f);
  EXPECT_NEAR(s[5], std::sin(100.0), 1e-6);
  EXPECT_NEAR(c[7], std::cos(1e30f), 1e-6);
}

}  // namespace
}  // namespace strata
