// Reductions and softmax against plain double references computed here, on every available device.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using RowFn = std::function<double(const std::vector<double>&)>;

// --- references ---

double ref_sum(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v;
  return s;
}
double ref_mean(const std::vector<double>& r) { return ref_sum(r) / static_cast<double>(r.size()); }
double ref_max(const std::vector<double>& r) {
  double m = -kInf;
  for (double v : r) m = std::isnan(v) || std::isnan(m) ? kNaN : std::max(m, v);
  return m;
}
double ref_min(const std::vector<double>& r) {
  double m = kInf;
  for (double v : r) m = std::isnan(v) || std::isnan(m) ? kNaN : std::min(m, v);
  return m;
}
double ref_argmax(const std::vector<double>& r) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < r.size(); ++i) {
    if (!std::isnan(r[best]) && (std::isnan(r[i]) || r[i] > r[best])) best = i;
  }
  return static_cast<double>(best);
}
double ref_argmin(const std::vector<double>& r) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < r.size(); ++i) {
    if (!std::isnan(r[best]) && (std::isnan(r[i]) || r[i] < r[best])) best = i;
  }
  return static_cast<double>(best);
}
RowFn ref_var(double correction) {
  return [correction](const std::vector<double>& r) {
    const double m = ref_mean(r);
    double s = 0;
    for (double v : r) s += (v - m) * (v - m);
    return s / std::max(0.0, static_cast<double>(r.size()) - correction);
  };
}
RowFn ref_norm(double p) {
  return [p](const std::vector<double>& r) {
    if (std::isinf(p)) {
      double m = p > 0 ? 0 : kInf;
      for (double v : r) m = p > 0 ? std::max(m, std::abs(v)) : std::min(m, std::abs(v));
      return m;
    }
    double s = 0;
    for (double v : r) s += p == 0 ? (v != 0) : std::pow(std::abs(v), p);
    return p == 0 || p == 1 ? s : std::pow(s, 1 / p);
  };
}
double ref_logsumexp(const std::vector<double>& r) {
  const double m = ref_max(r);
  if (std::isinf(m)) return m;
  double s = 0;
  for (double v : r) s += std::exp(v - m);
  return m + std::log(s);
}

/// Splits `values` (row-major over `shape`) into the rows that reducing `dims` (empty: all) makes.
std::vector<std::vector<double>> rows_of(const std::vector<double>& values, const Shape& shape,
                                         std::vector<int64_t> dims) {
  const auto nd = shape.ssize();
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
  }
  for (auto& d : dims) d = d < 0 ? d + nd : d;
  std::vector<bool> reduced(static_cast<std::size_t>(nd), false);
  for (int64_t d : dims) reduced[static_cast<std::size_t>(d)] = true;
  int64_t out_count = 1;
  for (int64_t d = 0; d < nd; ++d) out_count *= reduced[static_cast<std::size_t>(d)] ? 1 : shape[d];
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(out_count));
  for (std::size_t i = 0; i < values.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), out = 0, scale = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t c = rest % shape[d];
      rest /= shape[d];
      if (!reduced[static_cast<std::size_t>(d)]) {
        out += c * scale;
        scale *= shape[d];
      }
    }
    rows[static_cast<std::size_t>(out)].push_back(values[i]);
  }
  return rows;
}

Shape reduced_shape(const Shape& shape, std::vector<int64_t> dims, bool keepdim) {
  const auto nd = shape.ssize();
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
  }
  Shape out;
  for (int64_t d = 0; d < nd; ++d) {
    const bool r = std::find(dims.begin(), dims.end(), d) != dims.end() ||
                   std::find(dims.begin(), dims.end(), d - nd) != dims.end();
    if (!r) out.push_back(shape[d]);
    if (r && keepdim) out.push_back(1);
  }
  return out;
}

// --- inputs: random values in contiguous, transposed and strided layouts ---

enum class Layout { Contiguous, Transposed, Strided };

/// A tensor of `shape` whose elements are random; Transposed and Strided views are built from their strides.
Tensor random_tensor(const Shape& shape, DType dtype, Device device, Layout layout, uint32_t seed, double lo = -2,
                     double hi = 2) {
  Shape storage_shape = shape;
  if (layout == Layout::Transposed) std::reverse(storage_shape.begin(), storage_shape.end());
  if (layout == Layout::Strided && !storage_shape.empty()) storage_shape.back() = 2 * storage_shape.back() + 1;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(static_cast<std::size_t>(numel(storage_shape)));
  for (double& v : values) {
    v = is_floating(dtype) ? dist(gen) : std::round(dist(gen));
    if (dtype == DType::U8) v = std::abs(v);
  }
  const Tensor base = tensor<double>(values, storage_shape, device).to(dtype);
  if (layout == Layout::Contiguous) return base;
  Strides strides = contiguous_strides(storage_shape);
  int64_t offset = 0;
  if (layout == Layout::Transposed) {
    std::reverse(strides.begin(), strides.end());
  } else {
    strides.back() = 2;
    offset = 1;
  }
  return Tensor(base.storage(), dtype, shape, strides, offset);
}

void expect_values(const Tensor& out, const Shape& shape, const std::vector<double>& expected, double rtol,
                   double atol, const std::string& what) {
  ASSERT_EQ(shape_str(out.shape()), shape_str(shape)) << what;
  const std::vector<double> got = out.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i]) || std::isinf(expected[i])) {
      EXPECT_TRUE(std::isnan(expected[i]) ? std::isnan(got[i]) : got[i] == expected[i])
          << what << " at " << i << ": got " << got[i] << ", want " << expected[i];
    } else {
      EXPECT_NEAR(got[i], expected[i], atol + rtol * std::abs(expected[i])) << what << " at " << i;
    }
  }
}

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
};
// Full reductions, inner, outer, middle and several dims; big enough rows and row counts for every code path.
const std::vector<Case> kCases = {
    {{37}, {}},         {{5, 7}, {1}},       {{5, 7}, {0}},          {{3, 4, 5}, {1}},   {{3, 4, 5}, {0, 2}},
    {{3, 4, 5}, {-1}},  {{2, 3, 4, 5}, {1, 3}}, {{64, 600}, {1}},    {{600, 64}, {0}},   {{3, 40000}, {1}},
    {{40000, 3}, {0}},  {{2, 3, 4, 5}, {}},
};

class Reduce : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }

  // Checks op against ref on every case, layout and keepdim for one dtype; `one_dim`: only cases over one or
  // all dims (argmax, argmin).
  void check(const char* name, const std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)>& op,
             const RowFn& ref, DType dtype, double rtol, double atol, bool one_dim = false) {
    uint32_t seed = 1;
    for (const Case& c : kCases) {
      if (one_dim && c.dims.size() > 1) continue;
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
        const Tensor x = random_tensor(c.shape, dtype, device(), layout, seed++);
        const auto rows = rows_of(x.to_vector<double>(), c.shape, c.dims);
        std::vector<double> expected;
        for (const auto& r : rows) expected.push_back(ref(r));
        for (bool keepdim : {false, true}) {
          const std::string what = fmt::format("{} {} of {} over [{}] layout {} keepdim {}", name, dtype, c.shape,
                                               fmt::join(c.dims, ","), static_cast<int>(layout), keepdim);
          expect_values(op(x, c.dims, keepdim), reduced_shape(c.shape, c.dims, keepdim), expected, rtol, atol, what);
        }
      }
    }
  }
};

TEST_P(Reduce, SumMatchesReferenceForEveryDType) {
  const auto op = [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x, d, k); };
  check("sum", op, ref_sum, DType::F32, 1e-5, 1e-4);
  check("sum", op, ref_sum, DType::F64, 1e-12, 1e-12);
  check("sum", op, ref_sum, DType::F16, 2e-3, 5e-2);
  check("sum", op, ref_sum, DType::BF16, 1e-2, 5e-1);
  check("sum", op, ref_sum, DType::I32, 0, 0);
  check("sum", op, ref_sum, DType::I64, 0, 0);
}

TEST_P(Reduce, MeanMaxMinMatchReference) {
  check("mean", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return mean(x, d, k); }, ref_mean,
        DType::F32, 1e-5, 1e-6);
  for (DType dt : {DType::F32, DType::F16, DType::I32, DType::U8}) {
    check("max", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return max(x, d, k); }, ref_max, dt, 0,
          0);
    check("min", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return min(x, d, k); }, ref_min, dt, 0,
          0);
  }
}

TEST_P(Reduce, VarNormLogSumExpMatchReference) {
  for (DType dt : {DType::F32, DType::F64}) {
    const double tol = dt == DType::F32 ? 1e-5 : 1e-12;
    for (bool unbiased : {true, false}) {
      check("var", [=](const Tensor& x, const std::vector<int64_t>& d, bool k) { return var(x, d, unbiased, k); },
            ref_var(unbiased ? 1 : 0), dt, tol, tol);
    }
    for (double p : {2.0, 1.0, 3.0, 0.0, kInf, -kInf}) {
      check("norm", [=](const Tensor& x, const std::vector<int64_t>& d, bool k) { return norm(x, p, d, k); },
            ref_norm(p), dt, tol, tol);
    }
    check("logsumexp", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return logsumexp(x, d, k); },
          ref_logsumexp, dt, tol, tol);
  }
  check("var", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return var(x, d, true, k); }, ref_var(1),
        DType::BF16, 2e-2, 2e-2);
}

TEST_P(Reduce, ArgMaxArgMinMatchReference) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
    check("argmax", [](const Tensor& x, const std::vector<int64_t>& d, bool k) {
      return d.size() == 1 ? argmax(x, d[0], k) : argmax(x, std::nullopt, k);
    }, ref_argmax, dt, 0, 0, true);
    check("argmin", [](const Tensor& x, const std::vector<int64_t>& d, bool k) {
      return d.size() == 1 ? argmin(x, d[0], k) : argmin(x, std::nullopt, k);
    }, ref_argmin, dt, 0, 0, true);
  }
}

TEST_P(Reduce, ArgMaxPicksTheFirstOfTiesAndNaN) {
  const Tensor x = tensor<float>({1, 5, 5, 0, 5, 2, 2, 2}, {2, 4}, device());
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);
  EXPECT_EQ(argmax(x, std::nullopt, true).shape(), (Shape{1, 1}));
  std::vector<float> many(100000, 1.0f);  // large enough to be split across threads and blocks
  many[70000] = many[90000] = 3.0f;
  many[80000] = std::numeric_limits<float>::quiet_NaN();
  many[85000] = std::numeric_limits<float>::quiet_NaN();
  const Tensor big = tensor<float>(many, {}, device());
  EXPECT_EQ(argmax(big).item<int64_t>(), 80000);
  EXPECT_EQ(argmin(big).item<int64_t>(), 80000);
  EXPECT_TRUE(std::isnan(max(big).item<float>()));
  many[80000] = many[85000] = 1.0f;
  EXPECT_EQ(argmax(tensor<float>(many, {}, device())).item<int64_t>(), 70000);
  EXPECT_EQ(argmin(tensor<float>(many, {}, device())).item<int64_t>(), 0);
}

TEST_P(Reduce, IntegerAndBoolSumsAreI64) {
  const Tensor b = tensor<bool>({true, false, true, true}, {2, 2}, device());
  EXPECT_EQ(sum(b).dtype(), DType::I64);
  EXPECT_EQ(sum(b).item<int64_t>(), 3);
  EXPECT_EQ(sum(b, {0}).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  // 200 * 200 overflows u8 and the sum of large i32 values overflows i32: accumulation is in i64.
  EXPECT_EQ(sum(full({1000}, 200, TensorOptions(DType::U8).device(device()))).item<int64_t>(), 200000);
  EXPECT_EQ(sum(full({4}, 2000000000, TensorOptions(DType::I32).device(device()))).item<int64_t>(), 8000000000);
  EXPECT_EQ(max(b).dtype(), DType::Bool);
  EXPECT_EQ(argmax(b).dtype(), DType::I64);
}

TEST_P(Reduce, HalfTypesAccumulateInF32) {
  // An f16 running sum stops at 2048 (2048 + 1 rounds back); bf16 stops at 256.
  EXPECT_EQ(sum(ones({4096}, TensorOptions(DType::F16).device(device()))).item<float>(), 4096.0f);
  EXPECT_EQ(sum(ones({1000}, TensorOptions(DType::BF16).device(device()))).item<float>(), 1000.0f);
  EXPECT_EQ(mean(ones({5000}, TensorOptions(DType::F16).device(device()))).item<float>(), 1.0f);
}

TEST_P(Reduce, F32SumOfManyValuesIsAccurate) {
  // A naive running f32 sum of 2M values in [0, 1) is off by ~1e-5 relative; pairwise/partial sums are not.
  for (Layout layout : {Layout::Contiguous, Layout::Strided}) {
    const Tensor x = random_tensor({2000000}, DType::F32, device(), layout, 7, 0, 1);
    const double exact = ref_sum(x.to_vector<double>());
    EXPECT_NEAR(sum(x).item<double>(), exact, 1e-6 * exact);
    EXPECT_NEAR(mean(x).item<double>(), exact / 2e6, 1e-6 * exact / 2e6);
    double squares = 0;
    for (double v : x.to_vector<double>()) squares += v * v;
    EXPECT_NEAR(norm(x).item<double>(), std::sqrt(squares), 1e-6 * std::sqrt(squares));
  }
}

TEST_P(Reduce, EmptyInputs) {
  const TensorOptions opts = TensorOptions().device(device());
  EXPECT_EQ(sum(zeros({0}, opts)).item<float>(), 0.0f);
  EXPECT_EQ(sum(zeros({0, 3}, opts)).shape(), Shape{});
  EXPECT_EQ(sum(zeros({0, 3}, opts), {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(sum(zeros({0, 3}, DType::I32).to(device()), {1}).shape(), Shape{0});
  EXPECT_TRUE(std::isnan(mean(zeros({0}, opts)).item<float>()));
  EXPECT_EQ(logsumexp(zeros({2, 0}, opts), {1}).to_vector<float>(), (std::vector<float>(2, -INFINITY)));
  EXPECT_EQ(norm(zeros({0}, opts)).item<float>(), 0.0f);
  EXPECT_EQ(max(zeros({0, 3}, opts), {1}).shape(), Shape{0});  // nothing to reduce in an empty output
  EXPECT_EQ(softmax(zeros({0, 3}, opts), 1).shape(), (Shape{0, 3}));
}

TEST_P(Reduce, NoIdentityOnEmptyDimensionIsAnError) {
  const Tensor e = zeros({0, 3}, TensorOptions().device(device()));
  for (const auto& f : std::vector<std::function<Tensor()>>{[&] { return max(e); }, [&] { return min(e, {0}); },
                                                            [&] { return argmax(e); }, [&] { return argmin(e, 0); },
                                                            [&] { return norm(e, INFINITY, {0}); }}) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& err) {
      EXPECT_NE(std::string(err.what()).find("[0, 3]"), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("size 0"), std::string::npos) << err.what();
    }
  }
  try {
    max(e);
  } catch (const ShapeError& err) {
    EXPECT_EQ(std::string(err.what()).rfind("max:", 0), 0u) << err.what();
  }
}

TEST_P(Reduce, FloatingOnlyOpsRejectIntegersNamingOpAndDType) {
  const Tensor i = tensor<int64_t>({1, 2, 3}, {}, device());
  for (const auto& [name, f] : std::vector<std::pair<std::string, std::function<Tensor()>>>{
           {"mean", [&] { return mean(i); }},
           {"var", [&] { return var(i); }},
           {"norm", [&] { return norm(i); }},
           {"softmax", [&] { return softmax(i, 0); }},
           {"log_softmax", [&] { return log_softmax(i, 0); }}}) {
    try {
      f();
      ADD_FAILURE() << name << ": no error";
    } catch (const DTypeError& err) {
      EXPECT_EQ(std::string(err.what()).rfind(name + ":", 0), 0u) << err.what();
      EXPECT_NE(std::string(err.what()).find("i64"), std::string::npos) << err.what();
    }
  }
  // logsumexp computes integers in f32, as PyTorch 2 does.
  EXPECT_EQ(logsumexp(i, {0}).dtype(), DType::F32);
  EXPECT_NEAR(logsumexp(i, {0}).item<double>(), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
}

TEST_P(Reduce, BadDimsAreErrors) {
  const Tensor x = zeros({2, 3}, TensorOptions().device(device()));
  EXPECT_THROW(sum(x, {2}), IndexError);
  EXPECT_THROW(sum(x, {0, -2}), InvalidArgumentError);
  EXPECT_THROW(argmax(x, -3), IndexError);
  EXPECT_THROW(softmax(x, 2), IndexError);
}

TEST_P(Reduce, ZeroDimTensorReducesToItself) {
  const Tensor s = scalar_tensor(2.5, TensorOptions().device(device()));
  EXPECT_EQ(sum(s).item<float>(), 2.5f);
  EXPECT_EQ(sum(s, {0}, true).shape(), Shape{});
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);
  EXPECT_EQ(softmax(s, 0).item<float>(), 1.0f);
  EXPECT_TRUE(std::isnan(var(s).item<float>()));  // one value, Bessel's correction: 0/0
  EXPECT_EQ(var(s, {}, false).item<float>(), 0.0f);
}

TEST_P(Reduce, LogSumExpIsStableAndHandlesInfinities) {
  const Tensor x = tensor<float>({1000, 1000, -1000, -INFINITY, -INFINITY, -INFINITY, INFINITY, 1}, {4, 2}, device());
  const std::vector<float> out = logsumexp(x, {1}).to_vector<float>();
  EXPECT_NEAR(out[0], 1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(out[1], -1000.0f);
  EXPECT_EQ(out[2], -INFINITY);
  EXPECT_EQ(out[3], INFINITY);
}

void check_softmax(Device device, DType dtype, double tol) {
  uint32_t seed = 100;
  for (const Shape& shape : std::vector<Shape>{{7}, {4, 5}, {3, 4, 5}, {300, 1000}, {40, 5000}, {2, 70000}}) {
    for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
      const Tensor x = random_tensor(shape, dtype, device, layout, seed++, -30, 30);
      const std::vector<double> values = x.to_vector<double>();
      for (int64_t dim = -1; dim < shape.ssize(); dim += shape.ssize() > 2 ? 2 : 1) {
        const int64_t d = dim < 0 ? dim + shape.ssize() : dim;
        std::vector<double> want(values.size()), want_log(values.size());
        const int64_t n = shape[d];
        int64_t inner = 1;
        for (int64_t k = d + 1; k < shape.ssize(); ++k) inner *= shape[k];
        for (int64_t outer = 0; outer < static_cast<int64_t>(values.size()) / (n * inner); ++outer) {
          for (int64_t in = 0; in < inner; ++in) {
            const auto at = [&](int64_t j) { return static_cast<std::size_t>((outer * n + j) * inner + in); };
            std::vector<double> row;
            for (int64_t j = 0; j < n; ++j) row.push_back(values[at(j)]);
            const double lse = ref_logsumexp(row);
            for (int64_t j = 0; j < n; ++j) {
              want[at(j)] = std::exp(values[at(j)] - lse);
              want_log[at(j)] = values[at(j)] - lse;
            }
          }
        }
        const std::string what = fmt::format("{} {} dim {} layout {}", dtype, shape, dim, static_cast<int>(layout));
        expect_values(softmax(x, dim), shape, want, tol, tol * 1e-3, "softmax " + what);
        expect_values(log_softmax(x, dim), shape, want_log, tol, tol, "log_softmax " + what);
        if (shape.ssize() == 2 && shape[0] == 2) break;  // the long-row case only along its rows
      }
    }
  }
}

TEST_P(Reduce, SoftmaxAndLogSoftmaxMatchReferenceAlongEveryDim) {
  check_softmax(device(), DType::F32, 1e-5);
  check_softmax(device(), DType::F64, 1e-12);
  check_softmax(device(), DType::BF16, 2e-2);
}

TEST_P(Reduce, SoftmaxIsStableForLargeInputs) {
  const Tensor x = tensor<float>({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3}, device());
  const std::vector<float> p = softmax(x, 1).to_vector<float>();
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(p[i], std::exp(i - 2.0) / z, 1e-6);
    EXPECT_NEAR(p[3 + i], std::exp(-i) / z, 1e-6);
  }
  EXPECT_NEAR(log_softmax(x, 1).to_vector<float>()[0], -2 - std::log(z), 1e-5);
  // A row of -inf has no distribution: NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(softmax(full({3}, -INFINITY, TensorOptions().device(device())), 0).to_vector<float>()[0]));
}

INSTANTIATE_TEST_SUITE_P(Devices, Reduce, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
