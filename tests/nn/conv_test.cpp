// conv2d and conv2d_relu on every available device: against a nested-loop reference, gradients against finite
// differences (f64) and across dtypes (f32 backends against the f64 path), and every argument error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/runtime/parallel.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_checks.h"
#include "test_devices.h"
#include "test_fixtures.h"

namespace strata {
namespace {

namespace F = nn::functional;

using testing::deterministic_tensor;
using testing::expect_error;
using testing::expect_gradcheck;

struct Config {
  const char* name;
  int64_t n, c, h, w, o, kh, kw;
  F::Pair stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

const std::vector<Config> kConfigs{
    {"plain 3x3", 2, 3, 7, 6, 4, 3, 3},
    {"stride 2", 2, 3, 9, 8, 5, 3, 3, 2},
    {"padding 1", 2, 2, 5, 5, 3, 3, 3, 1, 1},
    {"dilation 2", 1, 2, 9, 9, 3, 3, 3, 1, 2, 2},
    {"groups 2", 2, 4, 6, 6, 6, 3, 3, 1, 1, 1, 2},
    {"depthwise", 2, 4, 6, 5, 4, 3, 3, 1, 1, 1, 4},
    {"no bias", 2, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, false},
    {"batch 1, 1x1 kernel", 1, 5, 4, 4, 3, 1, 1},
    {"rectangular everything", 3, 2, 8, 11, 4, 2, 4, {2, 3}, {1, 2}, {2, 1}},
    {"kernel covers padded input", 1, 2, 3, 3, 2, 5, 5, 1, 1},
    // A patch of 18 values and 40 output channels: the other way round of the thin weight-gradient GEMM (Note
    // [Weight gradients of thin convolutions] in backends/cpu/conv.cpp) from the configs above.
    {"40 output channels", 1, 2, 5, 5, 40, 3, 3, 1, 1},
    // A patch of 63 values: the thin GEMM without AVX-512, oneDNN's backward-weights with it.
    {"7 input channels", 2, 7, 6, 5, 9, 3, 3, 1, 1},
};

std::string describe(const Config& c) { return c.name; }

// PyTorch's conv2d in double with nested loops; `input` and `weight` may be any views.
std::vector<double> reference_conv(const Tensor& input, const Tensor& weight, const Tensor& bias, const Config& c,
                                   int64_t oh, int64_t ow) {
  const std::vector<double> x = input.to_vector<double>(), w = weight.to_vector<double>();
  const std::vector<double> b = bias.defined() ? bias.to_vector<double>() : std::vector<double>(c.o, 0.0);
  const int64_t cg = c.c / c.groups, og = c.o / c.groups;
  std::vector<double> out(static_cast<std::size_t>(c.n * c.o * oh * ow));
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < c.o; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double sum = b[static_cast<std::size_t>(o)];
          const int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t iy = y * c.stride.h - c.padding.h + i * c.dilation.h;
                const int64_t ix = xo * c.stride.w - c.padding.w + j * c.dilation.w;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                sum += x[static_cast<std::size_t>(((n * c.c + g * cg + ci) * c.h + iy) * c.w + ix)] *
                       w[static_cast<std::size_t>(((o * cg + ci) * c.kh + i) * c.kw + j)];
              }
          out[static_cast<std::size_t>(((n * c.o + o) * oh + y) * ow + xo)] = sum;
        }
  return out;
}

class Conv : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  TensorOptions opts(DType dtype = DType::F32) const { return TensorOptions(dtype).device(device()); }

  struct Operands {
    Tensor input, weight, bias;
  };
  Operands operands(const Config& c, DType dtype, std::uint64_t seed = 1) const {
    Operands o;
    o.input = deterministic_tensor({c.n, c.c, c.h, c.w}, dtype, device(), seed);
    o.weight = deterministic_tensor({c.o, c.c / c.groups, c.kh, c.kw}, dtype, device(), seed + 1);
    if (c.bias) o.bias = deterministic_tensor({c.o}, dtype, device(), seed + 2);
    return o;
  }
  static Tensor run(const Operands& o, const Config& c, bool relu = false) {
    return relu ? F::conv2d_relu(o.input, o.weight, o.bias, c.stride, c.padding, c.dilation, c.groups)
                : F::conv2d(o.input, o.weight, o.bias, c.stride, c.padding, c.dilation, c.groups);
  }
  // The f32 backends (oneDNN, cuDNN) against f64, whose gradients gradcheck verifies.
  void expect_f32_gradients_match_f64(const Config& c) const;
};

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " at " << i;
  }
}

TEST_P(Conv, MatchesTheNestedLoopReference) {
  for (const DType dtype : {DType::F32, DType::F64}) {
    for (const Config& c : kConfigs) {
      const Operands o = operands(c, dtype);
      const Tensor out = run(o, c);
      const int64_t oh = (c.h + 2 * c.padding.h - c.dilation.h * (c.kh - 1) - 1) / c.stride.h + 1;
      const int64_t ow = (c.w + 2 * c.padding.w - c.dilation.w * (c.kw - 1) - 1) / c.stride.w + 1;
      ASSERT_EQ(out.shape(), (Shape{c.n, c.o, oh, ow})) << describe(c);
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_EQ(out.device(), device());
      expect_close(out.to_vector<double>(), reference_conv(o.input, o.weight, o.bias, c, oh, ow),
                   dtype == DType::F32 ? 1e-5 : 1e-12, describe(c) + " " + std::string(dtype_name(dtype)));
    }
  }
}

TEST_P(Conv, NonContiguousInputsMatchTheReference) {
  const Config c{"strided", 2, 3, 6, 7, 4, 3, 3, 1, 1};
  // Input stored as [N, H, W, C] and permuted to NCHW; weight stored [O, kH, kW, C] likewise.
  const Tensor input = deterministic_tensor({c.n, c.h, c.w, c.c}, DType::F32, device(), 7).permute({0, 3, 1, 2});
  const Tensor weight = deterministic_tensor({c.o, c.kh, c.kw, c.c}, DType::F32, device(), 8).permute({0, 3, 1, 2});
  const Tensor bias = deterministic_tensor({2 * c.o}, DType::F32, device(), 9).slice(0, 0, std::nullopt, 2);
  ASSERT_FALSE(input.is_contiguous());
  ASSERT_FALSE(weight.is_contiguous());
  ASSERT_FALSE(bias.is_contiguous());
  const Tensor out = F::conv2d(input, weight, bias, c.stride, c.padding);
  expect_close(out.to_vector<double>(), reference_conv(input, weight, bias, c, 6, 7), 1e-5, "permuted views");
}

TEST_P(Conv, EmptyBatchGivesAnEmptyOutput) {
  const Tensor out = F::conv2d(zeros({0, 3, 5, 5}, opts()), zeros({4, 3, 3, 3}, opts()), zeros({4}, opts()));
  EXPECT_EQ(out.shape(), (Shape{0, 4, 3, 3}));
}

TEST_P(Conv, GradientsPassGradcheck) {
  for (const Config& c : kConfigs) {
    Operands o = operands(c, DType::F64, 11);
    std::vector<Tensor> inputs{o.input.requires_grad_(), o.weight.requires_grad_()};
    if (c.bias) inputs.push_back(o.bias.requires_grad_());
    expect_gradcheck(
        [c](const std::vector<Tensor>& x) {
          return F::conv2d(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
        },
        inputs, describe(c));
  }
}

TEST_P(Conv, GradientsOfOneInputOnly) {
  const Config c{"weight only", 1, 2, 5, 5, 3, 3, 3, 2, 1};
  Operands o = operands(c, DType::F64, 13);
  o.weight.requires_grad_();
  sum(F::conv2d(o.input, o.weight, o.bias, c.stride, c.padding)).backward();
  EXPECT_TRUE(o.weight.grad().defined());
  EXPECT_FALSE(o.input.grad().defined());
  EXPECT_FALSE(o.bias.grad().defined());
  // d(sum)/d(bias) = number of output pixels per channel, per sample.
  Operands p = operands(c, DType::F64, 13);
  p.bias.requires_grad_();
  sum(F::conv2d(p.input, p.weight, p.bias, c.stride, c.padding)).backward();
  for (const double g : p.bias.grad().to_vector<double>()) EXPECT_DOUBLE_EQ(g, 9.0);  // 1 sample x 3x3 pixels
}

void Conv::expect_f32_gradients_match_f64(const Config& c) const {
  Operands o32 = operands(c, DType::F32, 21), o64 = operands(c, DType::F64, 21);
  for (Operands* o : {&o32, &o64}) {
    o->input.requires_grad_();
    o->weight.requires_grad_();
    if (c.bias) o->bias.requires_grad_();
    const Tensor out = run(*o, c);
    sum(out * deterministic_tensor(out.shape(), out.dtype(), device(), 99)).backward();
  }
  expect_close(o32.input.grad().to_vector<double>(), o64.input.grad().to_vector<double>(), 1e-4,
               describe(c) + " input grad");
  expect_close(o32.weight.grad().to_vector<double>(), o64.weight.grad().to_vector<double>(), 1e-4,
               describe(c) + " weight grad");
  if (c.bias) {
    expect_close(o32.bias.grad().to_vector<double>(), o64.bias.grad().to_vector<double>(), 1e-4,
                 describe(c) + " bias grad");
  }
}

TEST_P(Conv, F32GradientsMatchTheF64Path) {
  for (const Config& c : kConfigs) expect_f32_gradients_match_f64(c);
}

// Large enough for the CPU's Winograd kernels, which the configs above are too small for (Note [Winograd
// convolutions] in backends/cpu/conv.cpp: 3x3, stride 1, and here 128 output tiles of 4x4, enough for one thread).
TEST_P(Conv, WinogradSizedConvolutionsMatchTheReferenceAndF64) {
  const testing::PoolSize one_thread(1);
  const Config c{"winograd-sized", 8, 16, 16, 16, 32, 3, 3, 1, 1};
  const Operands o = operands(c, DType::F32);
  // Winograd's transforms round at the scale of the operands, not of each output: an output near zero made of terms
  // near one is off by ~1e-5 (measured: 1.4e-5 at most here, outputs up to 20), so the forward is held to the
  // scale of the largest output.
  const std::vector<double> want = reference_conv(o.input, o.weight, o.bias, c, 16, 16);
  const double scale = std::abs(
      *std::max_element(want.begin(), want.end(), [](double x, double y) { return std::abs(x) < std::abs(y); }));
  const std::vector<double> got = run(o, c).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 4e-6 * (1.0 + scale)) << "forward at " << i;
  expect_close(run(o, c, true).to_vector<double>(), relu(run(o, c)).to_vector<double>(), 1e-6, "relu fused");
  expect_f32_gradients_match_f64(c);
}

TEST_P(Conv, ReluFusedEqualsReluOfConv) {
  int64_t zeros_seen = 0;
  for (const DType dtype : {DType::F32, DType::F64}) {
    for (const Config& c : kConfigs) {
      const Operands o = operands(c, dtype, 31);
      const std::vector<double> fused = run(o, c, true).to_vector<double>();
      const std::vector<double> separate = relu(run(o, c)).to_vector<double>();
      expect_close(fused, separate, dtype == DType::F32 ? 1e-6 : 1e-14, describe(c));
      zeros_seen += std::count(fused.begin(), fused.end(), 0.0);
    }
  }
  EXPECT_GT(zeros_seen, 100) << "the inputs should make many outputs negative";
}

TEST_P(Conv, ReluFusedGradientsPassGradcheck) {
  for (const Config& c : {kConfigs[2], kConfigs[4], kConfigs[6]}) {
    Operands o = operands(c, DType::F64, 41);
    std::vector<Tensor> inputs{o.input.requires_grad_(), o.weight.requires_grad_()};
    if (c.bias) inputs.push_back(o.bias.requires_grad_());
    expect_gradcheck(
        [c](const std::vector<Tensor>& x) {
          return F::conv2d_relu(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), c.stride, c.padding, c.dilation,
                                c.groups);
        },
        inputs, describe(c));
  }
}

TEST_P(Conv, WrongRanksAreRejected) {
  expect_error<ShapeError>([&] { F::conv2d(zeros({3, 5, 5}, opts()), zeros({4, 3, 3, 3}, opts())); },
                           {"conv2d", "4-D input", "[3, 5, 5]"});
  expect_error<ShapeError>([&] { F::conv2d(zeros({1, 3, 5, 5}, opts()), zeros({4, 3, 3}, opts())); },
                           {"conv2d", "4-D weight", "[4, 3, 3]"});
  expect_error<ShapeError>(
      [&] { F::conv2d_relu(zeros({1, 3, 5, 5}, opts()), zeros({4, 3, 3, 3}, opts()), zeros({4, 1}, opts())); },
      {"conv2d_relu", "bias", "[4, 1]"});
  expect_error<ShapeError>(
      [&] { F::conv2d(zeros({1, 3, 5, 5}, opts()), zeros({4, 3, 3, 3}, opts()), zeros({5}, opts())); },
      {"conv2d", "bias", "[5]"});
}

TEST_P(Conv, ChannelAndGroupMismatchesAreRejected) {
  expect_error<ShapeError>([&] { F::conv2d(zeros({1, 3, 5, 5}, opts()), zeros({4, 2, 3, 3}, opts())); },
                           {"conv2d", "[4, 2, 3, 3]", "[1, 3, 5, 5]", "expects 2 input channels"});
  expect_error<ShapeError>(
      [&] { F::conv2d(zeros({1, 3, 5, 5}, opts()), zeros({4, 1, 3, 3}, opts()), {}, 1, 0, 1, 2); },
      {"conv2d", "groups = 2", "3 input channels"});
  expect_error<ShapeError>(
      [&] { F::conv2d(zeros({1, 4, 5, 5}, opts()), zeros({3, 2, 3, 3}, opts()), {}, 1, 0, 1, 2); },
      {"conv2d", "groups = 2", "3 output channels"});
  expect_error<InvalidArgumentError>(
      [&] { F::conv2d(zeros({1, 4, 5, 5}, opts()), zeros({4, 4, 3, 3}, opts()), {}, 1, 0, 1, 0); },
      {"conv2d", "groups", "0"});
}

TEST_P(Conv, BadWindowsAreRejected) {
  const Tensor x = zeros({1, 2, 4, 4}, opts()), w = zeros({3, 2, 3, 3}, opts());
  expect_error<ShapeError>([&] { F::conv2d(x, zeros({3, 2, 5, 5}, opts())); },
                           {"conv2d", "larger than the padded input", "[1, 2, 4, 4]"});
  expect_error<ShapeError>([&] { F::conv2d(x, w, {}, 1, 0, 2); }, {"conv2d", "larger than the padded input", "5x5"});
  expect_error<InvalidArgumentError>([&] { F::conv2d(x, w, {}, 0); }, {"conv2d", "stride", "(0, 0)"});
  expect_error<InvalidArgumentError>([&] { F::conv2d(x, w, {}, {1, -1}); }, {"conv2d", "stride", "(1, -1)"});
  expect_error<InvalidArgumentError>([&] { F::conv2d(x, w, {}, 1, -1); }, {"conv2d", "padding", "(-1, -1)"});
  expect_error<InvalidArgumentError>([&] { F::conv2d(x, w, {}, 1, 0, {1, 0}); }, {"conv2d", "dilation", "(1, 0)"});
  // A kernel exactly as large as the padded input fits.
  EXPECT_EQ(F::conv2d(x, zeros({3, 2, 6, 6}, opts()), {}, 1, 1).shape(), (Shape{1, 3, 1, 1}));
}

TEST_P(Conv, DTypesAreChecked) {
  expect_error<DTypeError>(
      [&] { F::conv2d(zeros({1, 2, 4, 4}, opts(DType::F32)), zeros({3, 2, 3, 3}, opts(DType::F64))); },
      {"conv2d", "f64", "f32"});
  expect_error<DTypeError>([&] {
    F::conv2d(zeros({1, 2, 4, 4}, opts()), zeros({3, 2, 3, 3}, opts()), zeros({3}, opts(DType::F64)));
  },
                           {"conv2d", "bias", "f64"});
  expect_error<DTypeError>(
      [&] { F::conv2d(zeros({1, 2, 4, 4}, opts(DType::I64)), zeros({3, 2, 3, 3}, opts(DType::I64))); },
      {"conv2d", "i64"});
  expect_error<InvalidArgumentError>([&] { F::conv2d(Tensor(), zeros({3, 2, 3, 3}, opts())); }, {"conv2d"});
}

TEST_P(Conv, OperandsOnDifferentDevicesAreRejected) {
  if (device() == kCPU) GTEST_SKIP() << "needs a device other than cpu (another CPU device counts)";
  expect_error<DeviceMismatchError>([&] { F::conv2d(zeros({1, 2, 4, 4}, opts()), zeros({3, 2, 3, 3})); },
                                    {"conv2d"});
  expect_error<DeviceMismatchError>(
      [&] { F::conv2d(zeros({1, 2, 4, 4}, opts()), zeros({3, 2, 3, 3}, opts()), zeros({3})); }, {"conv2d"});
}

INSTANTIATE_TEST_SUITE_P(Devices, Conv, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

// conv2d_relu with a bias reaches cuDNN's fused call (cudnnConvolutionBiasActivationForward in backends/cuda/conv.cpp),
// which computes relu(conv + 0 * z + bias) with the output as z. The output's memory comes from the caching allocator
// and may hold anything, NaN included, and 0 * NaN is NaN: so the output is given a block that held NaN.
TEST(ConvOnCuda, FusedBiasReluIgnoresNanInTheOutputsRecycledMemory) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const Config c{"fused", 2, 4, 12, 12, 8, 3, 3, 1, 1};
  const Tensor input = deterministic_tensor({c.n, c.c, c.h, c.w}, DType::F32, gpu, 51);
  const Tensor weight = deterministic_tensor({c.o, c.c, c.kh, c.kw}, DType::F32, gpu, 52);
  const Tensor bias = deterministic_tensor({c.o}, DType::F32, gpu, 53);
  const std::vector<float> separate =
      relu(F::conv2d(input, weight, {}, c.stride, c.padding) + bias.reshape({1, c.o, 1, 1})).to_vector<float>();
  // Freed last, on the same stream, with the output's size: the allocator hands this block to the output next.
  const void* poisoned = nullptr;
  {
    const Tensor nan =
        full({c.n, c.o, c.h, c.w}, std::numeric_limits<float>::quiet_NaN(), TensorOptions(DType::F32).device(gpu));
    poisoned = nan.data_ptr();
  }
  const Tensor fused = F::conv2d_relu(input, weight, bias, c.stride, c.padding);
  ASSERT_EQ(static_cast<const void*>(fused.data_ptr()), poisoned)
      << "the output did not get the block full of NaN, so this test would check nothing";
  const std::vector<float> got = fused.to_vector<float>();
  ASSERT_EQ(got.size(), separate.size());
  int64_t zeros_seen = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "element " << i;
    ASSERT_NEAR(got[i], separate[i], 1e-5 * (1.0 + std::abs(separate[i]))) << "element " << i;
    zeros_seen += got[i] == 0.0f;
  }
  EXPECT_GT(zeros_seen, 0) << "the inputs should make some outputs negative before the ReLU";
}

// A cuDNN call that is refused and retried (another algorithm, or the unfused steps after the fused call) must not
// leave an error in the CUDA runtime's last-error slot: the next kernel's launch check would report it as its own.
TEST(ConvOnCuda, RefusedCudnnCallsLeaveNoErrorForTheNextKernel) {
  STRATA_SKIP_WITHOUT_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  for (const DType dtype : {DType::F32, DType::F64}) {
    for (const Config& c : kConfigs) {
      SCOPED_TRACE(::testing::Message() << describe(c) << ", " << dtype);
      Tensor input = deterministic_tensor({c.n, c.c, c.h, c.w}, dtype, gpu, 61);
      Tensor weight = deterministic_tensor({c.o, c.c / c.groups, c.kh, c.kw}, dtype, gpu, 62);
      Tensor bias = c.bias ? deterministic_tensor({c.o}, dtype, gpu, 63) : Tensor();
      input.requires_grad_();
      weight.requires_grad_();
      const Tensor out = F::conv2d_relu(input, weight, bias, c.stride, c.padding, c.dilation, c.groups);
      EXPECT_NO_THROW(sum(out + 1.0).item<double>());
      sum(out).backward();
      EXPECT_NO_THROW(sum(input.grad() * 2.0).item<double>());
      EXPECT_NO_THROW(sum(weight.grad() * 2.0).item<double>());
    }
  }
}

// Note [Fewer threads while other processes hold the cores]: the CPU's convolutions and products give the same bits
// whatever the thread budget, so a run gives the same results on a busy machine as on an idle one. The budget is
// pinned here instead of loading the machine; each shape's three passes run at the whole pool and at one thread.
TEST(ConvOnTheCpu, TheThreadBudgetLeavesEveryResultBitForBit) {
  const testing::PoolSize pool(std::max(num_threads(), 2));
  const std::vector<Config> shapes{
      {"reference network, first layer", 64, 1, 28, 28, 32, 3, 3, 1, 1},
      {"reference network, second layer (Winograd-sized where the CPU has it)", 64, 32, 14, 14, 64, 3, 3, 1, 1},
      {"1x1", 8, 64, 7, 7, 128, 1, 1},
      {"5x5 stride 2", 16, 16, 17, 17, 24, 5, 5, 2, 2},
      {"groups 4", 4, 32, 9, 9, 32, 3, 3, 1, 1, 1, 4},
      {"channels that fill no block", 2, 48, 20, 20, 40, 3, 3},
  };
  for (const Config& c : shapes) {
    std::vector<float> results[2];
    for (const int budget : {num_threads(), 1}) {
      detail::pin_thread_budget(budget);
      Tensor input = deterministic_tensor({c.n, c.c, c.h, c.w}, DType::F32, kCPU, 1).requires_grad_();
      Tensor weight = deterministic_tensor({c.o, c.c / c.groups, c.kh, c.kw}, DType::F32, kCPU, 2).requires_grad_();
      Tensor bias = deterministic_tensor({c.o}, DType::F32, kCPU, 3).requires_grad_();
      const Tensor out = F::conv2d(input, weight, bias, c.stride, c.padding, c.dilation, c.groups);
      // A product after the convolution (linear's x @ w^T and its gradients).
      const Tensor flat = out.reshape({c.n, -1});
      Tensor w = deterministic_tensor({16, flat.shape()[1]}, DType::F32, kCPU, 4).requires_grad_();
      const Tensor y = F::linear(flat, w);
      y.backward(deterministic_tensor(y.shape(), DType::F32, kCPU, 5));
      std::vector<float>& r = results[budget == 1 ? 1 : 0];
      for (const Tensor& t : {out, y, input.grad(), weight.grad(), bias.grad(), w.grad()}) {
        const std::vector<float> v = t.to_vector<float>();
        r.insert(r.end(), v.begin(), v.end());
      }
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)), 0)
        << c.name << ": the results on one thread differ from those on " << num_threads();
  }
}

TEST(ConvAndPoolAtInt64Limits, HugeWindowParametersAreRefused) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Tensor x = ones({1, 1, 5, 5});
  const Tensor w = ones({1, 1, 3, 3});
  EXPECT_THROW((void)F::conv2d(x, w, {}, 1, 0, F::Pair(kMax)), NotImplementedError);
  EXPECT_THROW((void)F::conv2d(x, w, {}, 1, F::Pair(kMax / 2 + 1)), NotImplementedError);
  EXPECT_THROW((void)F::conv2d(x.to(DType::F64), w.to(DType::F64), {}, F::Pair(kMax)), NotImplementedError);
  EXPECT_THROW((void)F::max_pool2d(x, F::Pair(kMax), std::nullopt, F::Pair(kMax / 2)), NotImplementedError);
  EXPECT_THROW(
      (void)F::avg_pool2d(ones({1, 1, 4, 4}), F::Pair(int64_t{1} << 32), std::nullopt, F::Pair(int64_t{1} << 31)),
      NotImplementedError);
}

}  // namespace
}  // namespace strata
