#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/ops/matmul_kernels.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"
#include "test_checks.h"
#include "test_devices.h"

namespace strata {
namespace {

using testing::deterministic_tensor;

// A view with shape `shape` whose last two dims are stored transposed (column-major matrices).
Tensor transposed_view(const Shape& shape, DType dtype, Device device, std::uint64_t seed) {
  Shape stored = shape;
  std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
  const Tensor base = deterministic_tensor(stored, dtype, device, seed);
  Strides strides = base.strides();
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return Tensor(base.storage(), dtype, shape, strides, 0);
}

// A plain reference: numpy's matmul in double, with the bound sum |a| |b| of each output for the tolerance.
struct Reference {
  Shape shape;
  std::vector<double> value, magnitude;
};

Reference reference_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  Shape as = a.shape(), bs = b.shape();
  if (a.dim() == 1) as.insert(0, 1);
  if (b.dim() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ab.size(), bb.size()), 1);
  for (std::size_t i = 1; i <= batch.size(); ++i) {
    const int64_t x = i <= ab.size() ? ab[ab.size() - i] : 1, y = i <= bb.size() ? bb[bb.size() - i] : 1;
    batch[batch.size() - i] = std::max(x, y);
  }
  // Offset of batch index `flat` in an operand with batch shape `own` (broadcast dims read index 0).
  const auto batch_offset = [&](int64_t flat, const Shape& own) {
    int64_t offset = 0, own_step = 1;
    for (auto i = batch.ssize() - 1; i >= 0; --i) {
      const int64_t index = flat % batch[i];
      flat /= batch[i];
      const int64_t j = i - (batch.ssize() - own.ssize());
      if (j >= 0) {
        if (own[j] != 1) offset += index * own_step;
        own_step *= own[j];
      }
    }
    return offset;
  };
  Reference r;
  const int64_t count = numel(batch);
  r.value.resize(static_cast<std::size_t>(count * m * n));
  r.magnitude.resize(r.value.size());
  for (int64_t i = 0; i < count; ++i) {
    const double* ai = av.data() + batch_offset(i, ab) * m * k;
    const double* bi = bv.data() + batch_offset(i, bb) * k * n;
    for (int64_t row = 0; row < m; ++row)
      for (int64_t col = 0; col < n; ++col) {
        double sum = 0, mag = 0;
        for (int64_t j = 0; j < k; ++j) {
          sum += ai[row * k + j] * bi[j * n + col];
          mag += std::abs(ai[row * k + j] * bi[j * n + col]);
        }
        r.value[static_cast<std::size_t>((i * m + row) * n + col)] = sum;
        r.magnitude[static_cast<std::size_t>((i * m + row) * n + col)] = mag;
      }
  }
  r.shape = batch;
  if (a.dim() > 1) r.shape.push_back(m);
  if (b.dim() > 1) r.shape.push_back(n);
  return r;
}

// Relative accuracy expected of one dtype's products (f32 accumulation for f16/bf16, TF32 off).
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-5;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 0;
  }
}

void expect_matches(const Tensor& result, const Reference& r, DType dtype, const std::string& what) {
  ASSERT_EQ(result.shape(), r.shape) << what;
  ASSERT_EQ(result.dtype(), dtype) << what;
  const std::vector<double> got = result.to_vector<double>();
  ASSERT_EQ(got.size(), r.value.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double allowed = tolerance(dtype) * (r.magnitude[i] + std::abs(r.value[i])) + 1e-30;
    ASSERT_NEAR(got[i], r.value[i], allowed) << what << " at flat index " << i;
  }
}

void expect_matmul_matches(const Tensor& a, const Tensor& b, const std::string& what) {
  expect_matches(matmul(a, b), reference_matmul(a, b), a.dtype(), what);
}

const std::vector<DType> kFloatDTypes{DType::F32, DType::F64, DType::F16, DType::BF16};

class Linalg : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
};

TEST_P(Linalg, MatrixProductsOfManySizesMatchTheReference) {
  const std::vector<std::array<int64_t, 3>> sizes{{1, 1, 1},   {1, 7, 1},    {7, 1, 5},   {3, 5, 2},
                                                  {17, 33, 9}, {64, 65, 63}, {1, 300, 1}, {130, 3, 97}};
  for (DType dtype : kFloatDTypes) {
    for (const auto& [m, k, n] : sizes) {
      const Tensor a = deterministic_tensor({m, k}, dtype, device(), 1),
                   b = deterministic_tensor({k, n}, dtype, device(), 2);
      expect_matmul_matches(a, b, fmt::format("{} {}x{} @ {}x{}", dtype, m, k, k, n));
      expect_matches(mm(a, b), reference_matmul(a, b), dtype, "mm");
    }
  }
}

TEST_P(Linalg, LargeProductsUseEveryThreadAndStayExact) {
  // Large enough for the parallel and oneDNN paths of the CPU backend (Note [Choosing the CPU GEMM]).
  for (DType dtype : {DType::F32, DType::F64}) {
    const Tensor a = deterministic_tensor({257, 300}, dtype, device(), 3),
                 b = deterministic_tensor({300, 129}, dtype, device(), 4);
    expect_matmul_matches(a, b, fmt::format("{} 257x300 @ 300x129", dtype));
    const Tensor at = transposed_view({257, 300}, dtype, device(), 5),
                 bt = transposed_view({300, 129}, dtype, device(), 6);
    expect_matmul_matches(at, bt, fmt::format("{} both transposed, large", dtype));
  }
}

TEST_P(Linalg, LargeBatchedProductsMatchTheReference) {
  // Over a million flops per call: the CPU backend's batched oneDNN path (broadcast batches included), in bf16 and
  // f16 too (Note [Reduced precision products on the CPU]).
  for (DType dtype : kFloatDTypes) {
    const auto r = [&](const Shape& s, std::uint64_t seed) { return deterministic_tensor(s, dtype, device(), seed); };
    expect_matmul_matches(r({8, 40, 50}, 50), r({8, 50, 36}, 51), fmt::format("{} bmm of 8", dtype));
    expect_matmul_matches(r({2, 1, 48, 50}, 52), r({4, 50, 40}, 53), fmt::format("{} broadcast batches", dtype));
    expect_matmul_matches(r({48, 50}, 54), r({8, 50, 40}, 55), fmt::format("{} matrix @ batch", dtype));
    expect_matmul_matches(transposed_view({8, 40, 50}, dtype, device(), 56),
                          transposed_view({8, 50, 36}, dtype, device(), 57),
                          fmt::format("{} transposed batches", dtype));
  }
}

TEST_P(Linalg, TransposedInputsMatchTheReference) {
  for (DType dtype : kFloatDTypes) {
    const Tensor a = deterministic_tensor({6, 11}, dtype, device(), 5),
                 b = deterministic_tensor({11, 4}, dtype, device(), 6);
    const Tensor at = transposed_view({6, 11}, dtype, device(), 7), bt = transposed_view({11, 4}, dtype, device(), 8);
    expect_matmul_matches(at, b, fmt::format("{} a transposed", dtype));
    expect_matmul_matches(a, bt, fmt::format("{} b transposed", dtype));
    expect_matmul_matches(at, bt, fmt::format("{} both transposed", dtype));
    const Tensor batched = transposed_view({3, 6, 11}, dtype, device(), 9);
    expect_matmul_matches(batched, deterministic_tensor({3, 11, 4}, dtype, device(), 10),
                          fmt::format("{} bmm transposed", dtype));
  }
}

TEST_P(Linalg, StridedInputsThatBlasCannotReadAreCopied) {
  const DType dtype = DType::F32;
  const Tensor base = deterministic_tensor({8, 20}, dtype, device(), 11);
  // Columns 2..12 of each row: row stride 20 > 10 columns, read in place.
  const Tensor narrowed(base.storage(), dtype, {8, 10}, {20, 1}, 2);
  // Every other column: no unit stride, so the tensors layer copies it.
  const Tensor stepped(base.storage(), dtype, {8, 10}, {20, 2}, 0);
  // One row broadcast to 5 rows (row stride 0).
  const Tensor expanded(base.storage(), dtype, {5, 20}, {0, 1}, 0);
  const Tensor b = deterministic_tensor({10, 3}, dtype, device(), 12);
  expect_matmul_matches(narrowed, b, "narrowed");
  expect_matmul_matches(stepped, b, "stepped");
  expect_matmul_matches(expanded, deterministic_tensor({20, 2}, dtype, device(), 13), "expanded");
  EXPECT_EQ(base.to_vector<float>(), deterministic_tensor({8, 20}, dtype, device(), 11).to_vector<float>())
      << "inputs changed";
}

TEST_P(Linalg, VectorOperandsFollowNumpy) {
  for (DType dtype : {DType::F32, DType::F64}) {
    const Tensor v = deterministic_tensor({5}, dtype, device(), 14), w = deterministic_tensor({5}, dtype, device(), 15);
    const Tensor dot = matmul(v, w);
    EXPECT_EQ(dot.dim(), 0);
    expect_matches(dot, reference_matmul(v, w), dtype, "dot");
    expect_matmul_matches(v, deterministic_tensor({5, 3}, dtype, device(), 16), "vector @ matrix");
    expect_matmul_matches(deterministic_tensor({4, 5}, dtype, device(), 17), v, "matrix @ vector");
    expect_matmul_matches(v, deterministic_tensor({2, 3, 5, 6}, dtype, device(), 18), "vector @ batch");
    expect_matmul_matches(deterministic_tensor({2, 3, 4, 5}, dtype, device(), 19), v, "batch @ vector");
    // A strided vector: every other element of 10.
    const Tensor base = deterministic_tensor({10}, dtype, device(), 20);
    const Tensor strided(base.storage(), dtype, {5}, {2}, 0);
    expect_matmul_matches(strided, w, "strided dot");
    expect_matmul_matches(deterministic_tensor({3, 5}, dtype, device(), 21), strided, "matrix @ strided vector");
  }
}

TEST_P(Linalg, BatchDimsBroadcast) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    const auto r = [&](const Shape& s, std::uint64_t seed) { return deterministic_tensor(s, dtype, device(), seed); };
    expect_matmul_matches(r({2, 1, 3, 4}, 22), r({5, 4, 2}, 23), "[2,1,3,4] @ [5,4,2]");
    expect_matmul_matches(r({3, 4}, 24), r({2, 4, 5}, 25), "matrix @ batch");
    expect_matmul_matches(r({2, 3, 4}, 26), r({4, 5}, 27), "batch @ matrix (one tall GEMM)");
    expect_matmul_matches(r({2, 1, 3, 4}, 28), r({1, 3, 4, 2}, 29), "[2,1] x [1,3] batches");
    expect_matmul_matches(transposed_view({2, 3, 4}, dtype, device(), 30), r({4, 5}, 31), "transposed batch @ matrix");
  }
}

TEST_P(Linalg, BatchDimsThatArePermutedAreRead) {
  // Batch dims stored as [3, 2] but viewed as [2, 3]: they do not collapse into one stride, so they are copied.
  const Tensor base = deterministic_tensor({3, 2, 4, 5}, DType::F32, device(), 32);
  const Tensor permuted(base.storage(), DType::F32, {2, 3, 4, 5}, {20, 40, 5, 1}, 0);
  expect_matmul_matches(permuted, deterministic_tensor({2, 3, 5, 6}, DType::F32, device(), 33), "permuted batch");
}

TEST_P(Linalg, BmmMultipliesMatchingBatches) {
  const Tensor a = deterministic_tensor({4, 3, 7}, DType::F32, device(), 34),
               b = deterministic_tensor({4, 7, 2}, DType::F32, device(), 35);
  expect_matches(bmm(a, b), reference_matmul(a, b), DType::F32, "bmm");
  // Many small matrices: the CPU backend spreads the batch over its threads.
  const Tensor many_a = deterministic_tensor({64, 40, 40}, DType::F64, device(), 36),
               many_b = deterministic_tensor({64, 40, 40}, DType::F64, device(), 37);
  expect_matches(bmm(many_a, many_b), reference_matmul(many_a, many_b), DType::F64, "bmm of 64");
}

// beta * bias + alpha * a @ b in double, with bias (shape [], [n], [m, 1], [1, n] or [m, n]) broadcast.
Reference reference_addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  Reference r = reference_matmul(a, b);
  const std::vector<double> bias_values = bias.to_vector<double>();
  const int64_t m = r.shape[0], n = r.shape[1];
  const Shape bs = bias.shape();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t bi =
          bs.size() == 2 ? (bs[0] == 1 ? 0 : i) * bs[1] + (bs[1] == 1 ? 0 : j) : (bs.empty() || bs[0] == 1 ? 0 : j);
      const auto at = static_cast<std::size_t>(i * n + j);
      r.value[at] = beta * bias_values[static_cast<std::size_t>(bi)] + alpha * r.value[at];
      r.magnitude[at] = std::abs(alpha) * r.magnitude[at] + std::abs(beta);
    }
  return r;
}

TEST_P(Linalg, AddmmScalesAndBroadcastsTheBias) {
  // Small and larger products: the CPU backend runs them through OpenBLAS and oneDNN respectively.
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{5, 6, 4}, {96, 100, 64}}) {
    for (DType dtype : {DType::F32, DType::F64, DType::F16}) {
      const Tensor a = deterministic_tensor({m, k}, dtype, device(), 38),
                   b = deterministic_tensor({k, n}, dtype, device(), 39);
      for (const Shape& bias_shape : std::vector<Shape>{{n}, {m, 1}, {m, n}, {}, {1}, {1, n}}) {
        const Tensor bias = deterministic_tensor(bias_shape, dtype, device(), 40);
        const std::vector<double> bias_values = bias.to_vector<double>();
        expect_matches(addmm(bias, a, b, 0.5, 2.0), reference_addmm(bias, a, b, 0.5, 2.0), dtype,
                       fmt::format("{} addmm {}x{}x{} with bias {}", dtype, m, k, n, bias_shape));
        EXPECT_EQ(bias.to_vector<double>(), bias_values) << "addmm must not modify its bias";
      }
      // Default beta = alpha = 1 on the same shapes (cached CPU primitives must not keep the old alpha and beta).
      const Tensor bias = deterministic_tensor({n}, dtype, device(), 41);
      expect_matches(addmm(bias, a, b), reference_addmm(bias, a, b, 1, 1), dtype, "addmm defaults");
      expect_matches(addmm(bias, a, b, -1.5, 0.25), reference_addmm(bias, a, b, -1.5, 0.25), dtype, "addmm again");
    }
  }
}

TEST_P(Linalg, BatchedGemmKernelAppliesAlphaAndBeta) {
  // The backend entry of Note [One batched GEMM] with a broadcast b (batch stride 0), alpha and beta: no public op
  // reaches a batched product with beta != 0, so the kernel is called directly.
  const int64_t batch = 6, m = 48, k = 50, n = 40;  // over a million flops: oneDNN's batched path on the CPU
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor a = deterministic_tensor({batch, m, k}, dtype, device(), 60),
                 b = deterministic_tensor({k, n}, dtype, device(), 61);
    const Tensor out = deterministic_tensor({batch, m, n}, dtype, device(), 62);
    const std::vector<double> before = out.to_vector<double>();
    TensorView bv = b.view();
    bv.shape = {batch, k, n};
    bv.strides = {0, n, 1};
    const ops::KernelSlot<ops::GemmFn> gemm("gemm");
    gemm.get(device())(detail::op_call("gemm", device()), out.view(), a.view(), bv, 2.0, 0.5, false);
    Reference expected = reference_matmul(a, b);
    for (std::size_t i = 0; i < expected.value.size(); ++i) {
      expected.value[i] = 2.0 * expected.value[i] + 0.5 * before[i];
      expected.magnitude[i] = 2.0 * expected.magnitude[i] + 0.5;
    }
    expect_matches(out, expected, dtype, fmt::format("{} gemm kernel, alpha 2, beta 0.5", dtype));
  }
}

TEST_P(Linalg, AddmmWithZeroBetaIgnoresNaNInTheBias) {
  const Tensor bias = full({2, 2}, std::numeric_limits<double>::quiet_NaN(), TensorOptions().device(device()));
  const Tensor a = tensor<float>({1, 2, 3, 4}, {2, 2}, device());
  const Tensor out = addmm(bias, a, a, 0, 1);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
}

TEST_P(Linalg, ProductsWithRowsOf512FloatsMatchTheReference) {
  // B's rows 512 floats apart, A with enough rows: on CPUs without AVX-512 the CPU backend copies B into longer rows
  // first (Note [Padding B's rows for AVX2's sgemm]); with alpha and beta (addmm) too.
  const auto r = [&](const Shape& s, std::uint64_t seed) {
    return deterministic_tensor(s, DType::F32, device(), seed);
  };
  expect_matmul_matches(r({64, 96}, 60), r({96, 512}, 61), "64x96 @ 96x512");
  expect_matmul_matches(r({100, 512}, 62), r({512, 1024}, 63).narrow(1, 0, 300), "B's 300 columns of rows of 1024");
  const Tensor bias = r({512}, 64), a = r({70, 33}, 65), b = r({33, 512}, 66);
  expect_matches(addmm(bias, a, b, 0.5, 2.0), reference_addmm(bias, a, b, 0.5, 2.0), DType::F32, "addmm, rows of 512");
}

TEST_P(Linalg, ZeroSizedProducts) {
  const TensorOptions opts = TensorOptions().device(device());
  // k == 0: a sum of nothing is 0, and addmm keeps beta * bias.
  const Tensor a = empty({3, 0}, opts), b = empty({0, 2}, opts);
  const Tensor z = matmul(a, b);
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(addmm(full({2}, 4.0, opts), a, b, 0.5).to_vector<float>(), std::vector<float>(6, 2.0f));
  EXPECT_EQ(matmul(empty({0}, opts), empty({0}, opts)).item<float>(), 0.0f);
  // m == 0 or an empty batch: an empty result of the right shape.
  EXPECT_EQ(matmul(empty({0, 4}, opts), empty({4, 5}, opts)).shape(), (Shape{0, 5}));
  EXPECT_EQ(matmul(empty({2, 0, 3, 4}, opts), empty({4, 5}, opts)).shape(), (Shape{2, 0, 3, 5}));
}

TEST_P(Linalg, ShapeMismatchNamesTheOpAndBothShapes) {
  const TensorOptions opts = TensorOptions().device(device());
  try {
    matmul(zeros({2, 3}, opts), zeros({4, 5}, opts));
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("matmul"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[4, 5]"), std::string::npos) << message;
  }
  EXPECT_THROW(matmul(zeros({2, 3, 4}, opts), zeros({3, 4, 5}, opts)), ShapeError);  // batches 2 and 3
  EXPECT_THROW(matmul(zeros({}, opts), zeros({3}, opts)), ShapeError);
  EXPECT_THROW(mm(zeros({2, 3, 4}, opts), zeros({4, 5}, opts)), ShapeError);
  EXPECT_THROW(mm(zeros({3}, opts), zeros({3, 5}, opts)), ShapeError);
  EXPECT_THROW(bmm(zeros({2, 3, 4}, opts), zeros({3, 4, 5}, opts)), ShapeError);
  EXPECT_THROW(bmm(zeros({3, 4}, opts), zeros({4, 5}, opts)), ShapeError);
  EXPECT_THROW(addmm(zeros({3}, opts), zeros({2, 3}, opts), zeros({3, 4}, opts)), ShapeError);
  EXPECT_THROW(addmm(zeros({2, 2, 4}, opts), zeros({2, 3}, opts), zeros({3, 4}, opts)), ShapeError);
}

TEST_P(Linalg, IntegerAndMixedDTypesAreRejectedByName) {
  const TensorOptions opts = TensorOptions().device(device());
  try {
    matmul(zeros({2, 2}, TensorOptions(DType::I64).device(device())),
           zeros({2, 2}, TensorOptions(DType::I64).device(device())));
    FAIL() << "no DTypeError";
  } catch (const DTypeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("matmul"), std::string::npos) << message;
    EXPECT_NE(message.find("i64"), std::string::npos) << message;
  }
  EXPECT_THROW(mm(zeros({2, 2}, TensorOptions(DType::F32).device(device())),
                  zeros({2, 2}, TensorOptions(DType::F64).device(device()))),
               DTypeError);
  EXPECT_THROW(addmm(zeros({2}, TensorOptions(DType::F64).device(device())), zeros({2, 2}, opts), zeros({2, 2}, opts)),
               DTypeError);
}

TEST_P(Linalg, OperandsOnDifferentDevicesAreRejected) {
  if (device() == kCPU) GTEST_SKIP() << "needs a device other than cpu (another CPU device counts)";
  try {
    matmul(zeros({2, 2}, TensorOptions().device(device())), zeros({2, 2}));
    FAIL() << "no DeviceMismatchError";
  } catch (const DeviceMismatchError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
  }
  EXPECT_THROW(addmm(zeros({2}), zeros({2, 2}, TensorOptions().device(device())),
                     zeros({2, 2}, TensorOptions().device(device()))),
               DeviceMismatchError);
}

TEST_P(Linalg, Tf32IsOffByDefaultAndStaysClose) {
  EXPECT_FALSE(allow_tf32());
  set_allow_tf32(true);
  EXPECT_TRUE(allow_tf32());
  const Tensor a = deterministic_tensor({64, 128}, DType::F32, device(), 42),
               b = deterministic_tensor({128, 32}, DType::F32, device(), 43);
  const Reference r = reference_matmul(a, b);
  const std::vector<double> got = matmul(a, b).to_vector<double>();
  set_allow_tf32(false);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], r.value[i], 2e-3 * r.magnitude[i]) << "TF32 (10-bit mantissa) result at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Linalg, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

}  // namespace
}  // namespace strata
