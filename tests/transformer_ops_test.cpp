// The ops Transformers and sampling need: sin, cos, erf, GELU in both forms, masked_fill, triu/tril,
// split/chunk, topk and multinomial (values, gradients against finite differences in f64, errors), and the pieces
// of a nanoGPT model that existed before: AdamW with a parameter group without weight decay, and an embedding's
// weight shared with the output layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/io/safetensors.h"
#include "strata/nn/layers.h"
#include "strata/optim/adam.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/random.h"
#include "test_checks.h"

namespace strata {
namespace {

using Inputs = std::vector<Tensor>;
using testing::expect_error;
using testing::expect_gradcheck;

class TransformerOps : public ::testing::Test {
 protected:
  void SetUp() override { default_generator(kCPU).manual_seed(7); }
};

Tensor leaf(const Shape& shape) {
  Tensor t = randn(shape, DType::F64);
  t.requires_grad_();
  return t;
}

std::vector<double> values(const Tensor& t) { return t.to(DType::F64).to_vector<double>(); }

// --- sin, cos, erf, GELU ---

TEST_F(TransformerOps, SinCosErfMatchTheCLibraryInEveryFloatingDtype) {
  const std::vector<double> xs = {-3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 7.0};
  for (const DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    const Tensor x = tensor(xs).to(dtype);
    const double tol = dtype == DType::F16 ? 4e-3 : dtype == DType::BF16 ? 3e-2 : 1e-6;
    const auto check = [&](const Tensor& got, double (*ref)(double), const char* name) {
      EXPECT_EQ(got.dtype(), dtype) << name;
      const auto v = values(got);
      const auto in = values(x);  // the rounded inputs
      for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(v[i], ref(in[i]), tol) << name << " at " << in[i];
    };
    check(
        sin(x), [](double v) { return std::sin(v); }, "sin");
    check(
        cos(x), [](double v) { return std::cos(v); }, "cos");
    check(
        erf(x), [](double v) { return std::erf(v); }, "erf");
  }
  // Integers compute in f32, as PyTorch.
  EXPECT_EQ(sin(tensor<int64_t>({1, 2})).dtype(), DType::F32);
}

TEST_F(TransformerOps, GeluTanhIsPyTorchsFormula) {
  const std::vector<double> xs = {-4.0, -1.5, -0.3, 0.0, 0.7, 2.5};
  const auto got = values(gelu(tensor(xs), "tanh"));
  const auto exact = values(gelu(tensor(xs), "none"));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    const double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(got[i], want, 1e-12) << x;
    EXPECT_NEAR(exact[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-12) << x;
  }
  EXPECT_NE(got[2], exact[2]);  // the two forms differ
  expect_error<InvalidArgumentError>([] { (void)gelu(tensor({1.0}), "sigmoid"); },
                                     {"gelu", "sigmoid", "either none or tanh"});
  const nn::GELU tanh_layer("tanh");
  EXPECT_EQ(tanh_layer.approximate(), "tanh");
  expect_error<InvalidArgumentError>([] { nn::GELU("erf"); }, {"GELU", "erf"});
}

TEST_F(TransformerOps, ElementwiseGradients) {
  const Tensor a = leaf({3, 4});
  expect_gradcheck([](const Inputs& x) { return sin(x[0]); }, {a}, "sin");
  expect_gradcheck([](const Inputs& x) { return cos(x[0]); }, {a}, "cos");
  expect_gradcheck([](const Inputs& x) { return erf(x[0]); }, {a}, "erf");
  expect_gradcheck([](const Inputs& x) { return gelu(x[0], "tanh"); }, {a}, "gelu tanh");
  expect_gradcheck([](const Inputs& x) { return gelu(x[0], "none"); }, {a}, "gelu none");
}

// --- masked_fill ---

TEST_F(TransformerOps, MaskedFillBroadcastsTheMaskAsPyTorch) {
  const Tensor a = arange(0, 6, 1, DType::F32).reshape({2, 3});
  const Tensor mask = tensor<bool>({true, false, true}, {3});
  EXPECT_EQ(values(masked_fill(a, mask, -1.5)), (std::vector<double>{-1.5, 1, -1.5, -1.5, 4, -1.5}));
  // The out-of-place form broadcasts self with the mask: a row against a column of masks.
  const Tensor column = tensor<bool>({false, true}, {2, 1});
  const Tensor row = tensor<float>({1, 2, 3}, {3});
  const Tensor out = masked_fill(row, column, 0);
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(out), (std::vector<double>{1, 2, 3, 0, 0, 0}));
  // -inf for attention scores; a 0-dim tensor value; integer tensors.
  EXPECT_TRUE(std::isinf(values(masked_fill(a, mask, -std::numeric_limits<double>::infinity()))[0]));
  EXPECT_EQ(values(masked_fill(a, mask, scalar_tensor(7.0))), (std::vector<double>{7, 1, 7, 7, 4, 7}));
  EXPECT_EQ(values(masked_fill(tensor<int64_t>({5, 6}), tensor<bool>({false, true}), 9)), (std::vector<double>{5, 9}));
}

TEST_F(TransformerOps, MaskedFillInPlaceAndErrors) {
  Tensor a = zeros({2, 3});
  Tensor& same = masked_fill_(a, tensor<bool>({true, false, false}), 2.0);
  EXPECT_EQ(&same, &a);
  EXPECT_EQ(values(a), (std::vector<double>{2, 0, 0, 2, 0, 0}));
  // Through a transposed (non-contiguous) view.
  Tensor t = zeros({3, 2});
  Tensor tv = t.t();
  masked_fill_(tv, tensor<bool>({true, false, false}), 1.0);
  EXPECT_EQ(values(t), (std::vector<double>{1, 1, 0, 0, 0, 0}));
  expect_error<DTypeError>(
      [] {
        (void)masked_fill(zeros({2}), tensor<float>({1, 0}), 1);
      },
      {"masked_fill", "bool", "f32"});
  expect_error<ShapeError>(
      [] {
        (void)masked_fill(zeros({2}), tensor<bool>({true, false, true}), 1);
      },
      {"masked_fill"});
  expect_error<ShapeError>(
      [] {
        (void)masked_fill(zeros({2}), tensor<bool>({true, false}), zeros({2}));
      },
      {"masked_fill", "0-dimensional", "1 dimension"});
  expect_error<ShapeError>(
      [] {
        Tensor b = zeros({3});
        masked_fill_(b, tensor<bool>({true, false, true}, {3, 1}), 1);
      },
      {"masked_fill_", "self's shape [3]"});
  // PyTorch's value rule: the value must fit the dtype's range; floats truncate into integers, unsigned types wrap
  // negatives down to -max, bool takes anything.
  const Tensor m = tensor<bool>({true, false});
  EXPECT_EQ(values(masked_fill(zeros({2}, DType::I64), m, 1.5)), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(masked_fill(zeros({2}, DType::U8), m, -1)), (std::vector<double>{255, 0}));
  EXPECT_EQ(values(masked_fill(zeros({2}, DType::Bool), m, 300)), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(masked_fill(zeros({2}, DType::F16), m, -std::numeric_limits<double>::infinity()))[0],
            -std::numeric_limits<double>::infinity());
  expect_error<DTypeError>([&] { (void)masked_fill(zeros({2}, DType::U8), m, 256.0); },
                           {"masked_fill", "256", "u8", "overflow"});
  expect_error<DTypeError>([&] { (void)masked_fill(zeros({2}, DType::U8), m, -256); }, {"-256", "u8"});
  expect_error<DTypeError>([&] { (void)masked_fill(zeros({2}, DType::I32), m, int64_t{1} << 31); },
                           {"2147483648", "i32"});
  expect_error<DTypeError>([&] { (void)masked_fill(zeros({2}, DType::I64), m, std::nan("")); }, {"nan", "i64"});
  expect_error<DTypeError>([&] { (void)masked_fill(zeros({2}, DType::F16), m, 70000.0); }, {"70000", "f16"});
}

TEST_F(TransformerOps, MaskedFillGradients) {
  const Tensor mask = tensor<bool>({true, false, false, true}, {4});
  const Tensor a = leaf({3, 4});
  expect_gradcheck([mask](const Inputs& x) { return masked_fill(x[0], mask, -2.0); }, {a}, "scalar value");
  const Tensor col = tensor<bool>({false, true, true}, {3, 1});
  expect_gradcheck([col](const Inputs& x) { return masked_fill(x[0], col, 0.0); }, {leaf({4})}, "broadcast self");
  // A value tensor that requires grad collects the gradient of the filled positions.
  Tensor v = scalar_tensor(0.5, DType::F64);
  v.requires_grad_();
  expect_gradcheck([mask](const Inputs& x) { return masked_fill(x[0], mask, x[1]); }, {a, v}, "tensor value");
  // In place on a non-leaf, recorded.
  Tensor b = leaf({3, 4});
  Tensor y = b * 2.0;
  masked_fill_(y, mask, 1.0);
  sum(y).backward();
  const auto g = values(b.grad());
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], (i % 4 == 0 || i % 4 == 3) ? 0.0 : 2.0) << i;
}

// --- triu / tril ---

TEST_F(TransformerOps, TriuTrilKeepTheirTriangle) {
  const Tensor a = arange(1, 13, 1, DType::F32).reshape({3, 4});
  EXPECT_EQ(values(tril(a)), (std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_EQ(values(triu(a)), (std::vector<double>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_EQ(values(triu(a, 1)), (std::vector<double>{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}));
  EXPECT_EQ(values(tril(a, -1)), (std::vector<double>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  // nanoGPT's causal mask: tril of ones, batched, in bool too.
  const Tensor causal = tril(ones({2, 3, 3}, DType::Bool));
  EXPECT_EQ(causal.dtype(), DType::Bool);
  EXPECT_EQ(values(causal.select(0, 1)), (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  // A transposed input, and in place.
  EXPECT_EQ(values(tril(a.t())), values(triu(a).t().contiguous()));
  Tensor b = a.clone();
  EXPECT_EQ(&tril_(b, 1), &b);
  EXPECT_EQ(values(b), values(tril(a, 1)));
  expect_error<ShapeError>([] { (void)triu(ones({3})); }, {"triu", "at least 2 dimensions"});
}

TEST_F(TransformerOps, TriuTrilGradients) {
  expect_gradcheck([](const Inputs& x) { return triu(x[0], -1); }, {leaf({2, 3, 4})}, "triu");
  expect_gradcheck([](const Inputs& x) { return tril(x[0], 2); }, {leaf({4, 3})}, "tril");
}

// --- split / chunk ---

TEST_F(TransformerOps, SplitAndChunkAreViewsWithPyTorchsSizes) {
  const Tensor a = arange(0, 14, 1, DType::F32).reshape({2, 7});
  const auto sizes = [](const std::vector<Tensor>& parts) {
    std::vector<int64_t> s;
    for (const auto& p : parts) s.push_back(p.size(1));
    return s;
  };
  EXPECT_EQ(sizes(split(a, 3, 1)), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(sizes(split(a, 7, -1)), (std::vector<int64_t>{7}));
  EXPECT_EQ(sizes(split_with_sizes(a, {2, 0, 5}, 1)), (std::vector<int64_t>{2, 0, 5}));
  EXPECT_EQ(sizes(chunk(a, 3, 1)), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(sizes(chunk(a, 4, 1)), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(sizes(chunk(a, 6, 1)), (std::vector<int64_t>{2, 2, 2, 1}));  // fewer parts than asked, as PyTorch
  EXPECT_EQ(chunk(zeros({0, 2}), 3, 0).size(), 3u);
  EXPECT_EQ(split(zeros({0, 2}), 0, 0).size(), 1u);
  // Views: writing a part writes the input.
  auto parts = split(a, 3, 1);
  parts[1].fill_(-1);
  EXPECT_EQ(values(a.select(0, 0)), (std::vector<double>{0, 1, 2, -1, -1, -1, 6}));
  expect_error<InvalidArgumentError>([&] { (void)split(a, -1, 1); }, {"split", "non-negative", "-1"});
  expect_error<InvalidArgumentError>([&] { (void)split(a, 0, 1); }, {"split", "dimension size of 7"});
  expect_error<InvalidArgumentError>([&] { (void)split_with_sizes(a, {3, 3}, 1); }, {"sum exactly to 7", "[3, 3]"});
  expect_error<InvalidArgumentError>([&] { (void)chunk(a, 0, 1); }, {"chunk", "greater than 0"});
  expect_error<ShapeError>([] { (void)split(scalar_tensor(1.0), 1, 0); }, {"split", "1-dimensional"});
}

TEST_F(TransformerOps, SplitGradientsFlowBackToEachSlice) {
  // Each part weighted differently, so that a gradient sent to the wrong slice shows.
  expect_gradcheck(
      [](const Inputs& x) {
        const auto p = split(x[0], 2, 1);
        return cat({p[0] * 3.0, sin(p[1]), p[2] * p[2]}, 1);
      },
      {leaf({3, 5})}, "split");
  expect_gradcheck(
      [](const Inputs& x) {
        const auto p = chunk(x[0], 3, 0);
        return p[0] * p[1] + p[2];
      },
      {leaf({6, 2})}, "chunk");
}

// --- topk ---

TEST_F(TransformerOps, TopkOrdersBestFirstWithNanLargestAndStableTies) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = tensor<double>({3, nan, 1, 3, 5, -2}, {1, 6});
  auto [v, i] = topk(a, 3);
  EXPECT_TRUE(std::isnan(values(v)[0]));
  EXPECT_EQ(values(v)[1], 5);
  EXPECT_EQ(values(v)[2], 3);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 0}));  // of the two 3s, the first
  auto [sv, si] = topk(a, 2, -1, /*largest=*/false);
  EXPECT_EQ(values(sv), (std::vector<double>{-2, 1}));
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{5, 2}));
  // Along dim 0, in f16 and i32.
  const Tensor b = tensor<float>({1, 9, 4, 2, 8, 3}, {3, 2});
  for (const DType dtype : {DType::F16, DType::I32}) {
    auto [bv, bi] = topk(b.to(dtype), 2, 0);
    EXPECT_EQ(bv.dtype(), dtype);
    EXPECT_EQ(bv.shape(), (Shape{2, 2}));
    EXPECT_EQ(values(bv), (std::vector<double>{8, 9, 4, 3}));
    EXPECT_EQ(bi.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 2}));
  }
  EXPECT_EQ(std::get<0>(topk(b, 0)).shape(), (Shape{3, 0}));
  expect_error<IndexError>([&] { (void)topk(b, 3); }, {"topk", "k (3)", "size 2"});
  expect_error<DTypeError>([] { (void)topk(ones({3}, DType::Bool), 1); }, {"topk", "bool"});
}

TEST_F(TransformerOps, TopkGradientGoesToTheChosenPositions) {
  expect_gradcheck([](const Inputs& x) { return std::get<0>(topk(x[0], 2)); }, {leaf({3, 5})}, "topk dim -1");
  expect_gradcheck([](const Inputs& x) { return std::get<0>(topk(x[0], 3, 0, false)); }, {leaf({4, 3})},
                   "topk smallest dim 0");
}

// --- multinomial ---

TEST_F(TransformerOps, MultinomialWithReplacementFollowsTheWeights) {
  const Tensor w = tensor<float>({0.0f, 1.0f, 3.0f, 0.0f}, {4});
  const Tensor s = multinomial(w, 4000, true);
  EXPECT_EQ(s.dtype(), DType::I64);
  EXPECT_EQ(s.shape(), (Shape{4000}));
  int64_t twos = 0;
  for (const int64_t c : s.to_vector<int64_t>()) {
    ASSERT_TRUE(c == 1 || c == 2) << c;  // never a zero weight
    twos += c == 2;
  }
  EXPECT_NEAR(static_cast<double>(twos) / 4000.0, 0.75, 0.04);
  // The same generator state gives the same draws; a new draw differs.
  Generator g(123);
  const auto first = multinomial(w, 50, true, &g).to_vector<int64_t>();
  g.manual_seed(123);
  EXPECT_EQ(multinomial(w, 50, true, &g).to_vector<int64_t>(), first);
  EXPECT_NE(multinomial(w, 50, true, &g).to_vector<int64_t>(), first);
}

TEST_F(TransformerOps, MultinomialWithoutReplacementDrawsDistinctCategories) {
  const Tensor w = tensor<double>({1, 0, 2, 5, 0, 1, 1, 1, 1, 1}, {2, 5});
  const Tensor s = multinomial(w, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  const auto v = s.to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(v.begin(), v.begin() + 3), (std::set<int64_t>{0, 2, 3}));  // the only positive ones
  EXPECT_EQ(std::set<int64_t>(v.begin() + 3, v.end()).size(), 3u);
  // The heaviest category comes first most often.
  int64_t first_is_3 = 0;
  for (int i = 0; i < 300; ++i) first_is_3 += multinomial(w.select(0, 0), 1).item<int64_t>() == 3;
  EXPECT_NEAR(first_is_3 / 300.0, 5.0 / 8.0, 0.1);
}

TEST_F(TransformerOps, MultinomialRefusesWhatPyTorchRefuses) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const double bad : {-1.0, inf, nan}) {
    expect_error<InvalidArgumentError>(
        [bad] {
          (void)multinomial(tensor<double>({1, bad}), 1);
        },
        {"multinomial", "`inf`, `nan` or element < 0"});
  }
  expect_error<InvalidArgumentError>(
      [] {
        (void)multinomial(tensor<float>({1, 1, 0, 0}, {2, 2}), 1, true);
      },
      {"sum of probabilities <= 0"});
  expect_error<InvalidArgumentError>(
      [] {
        (void)multinomial(tensor<float>({1, 0, 0}), 2);
      },
      {"not enough non-negative category"});
  expect_error<InvalidArgumentError>(
      [] {
        (void)multinomial(tensor<float>({1, 1}), 3);
      },
      {"n_sample > prob_dist.size(-1)"});
  expect_error<InvalidArgumentError>([] { (void)multinomial(tensor<float>({1, 1}), 0, true); }, {"n_sample <= 0"});
  expect_error<ShapeError>([] { (void)multinomial(ones({2, 2, 2}), 1); }, {"1 or 2 dim"});
  expect_error<DTypeError>([] { (void)multinomial(tensor<int64_t>({1, 2}), 1); }, {"floating", "i64"});
}

// --- the pieces of nanoGPT that existed before: AdamW's groups and tied weights ---

TEST_F(TransformerOps, AdamWLeavesTheNoDecayGroupUndecayed) {
  // With zero gradients Adam's update is 0, so only the decoupled decay moves a parameter: p *= 1 - lr * wd.
  Tensor w = ones({2, 2}), b = ones({2});
  w.requires_grad_();
  b.requires_grad_();
  optim::AdamW opt(std::vector<optim::ParamGroup>{{{w}, std::nullopt, 0.5}, {{b}, std::nullopt, 0.0}},
                   optim::AdamOptions(0.1));
  w.set_grad(zeros({2, 2}));
  b.set_grad(zeros({2}));
  opt.step();
  for (const double v : values(w)) EXPECT_NEAR(v, 1.0 - 0.1 * 0.5, 1e-7);
  EXPECT_EQ(values(b), (std::vector<double>(2, 1.0)));
}

TEST_F(TransformerOps, TiedEmbeddingAndOutputWeightsAreOneParameter) {
  auto model = std::make_shared<nn::Sequential>();
  auto wte = std::make_shared<nn::Embedding>(5, 3);
  auto head = std::make_shared<nn::Linear>(nn::LinearOptions(3, 5).bias(false));
  model->push_back(wte);
  model->push_back(head);
  head->replace_parameter("weight", wte->weight);  // nanoGPT: wte.weight = lm_head.weight
  EXPECT_TRUE(head->weight.is_same(wte->weight));
  EXPECT_EQ(model->named_parameters().size(), 2u);
  ASSERT_EQ(model->parameters().size(), 1u);  // stepped once

  // Gradients of both uses accumulate in the one tensor.
  const Tensor idx = tensor<int64_t>({1, 3});
  const Tensor logits = (*model)(idx);
  sum(logits * logits).backward();
  const Tensor grad = wte->weight.grad();
  ASSERT_TRUE(grad.defined());
  const Tensor w = wte->weight.detach();
  const Tensor h = index_select(w, 0, idx);        // [2, 3]
  const Tensor dlogits = matmul(h, w.t()) * 2.0;   // [2, 5]
  const Tensor via_head = matmul(dlogits.t(), h);  // [5, 3]
  const Tensor via_embedding =
      scatter_add(zeros({5, 3}), 0, idx.reshape({2, 1}).expand({2, 3}), matmul(dlogits, w).contiguous());
  const auto want = values(via_head + via_embedding), got = values(grad);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;

  // One optimizer update, of the shared tensor.
  const Tensor before = w.clone();
  optim::AdamW opt(model->parameters(), optim::AdamOptions(0.01).weight_decay(0.0));
  opt.step();
  EXPECT_TRUE(head->weight.is_same(wte->weight));
  const auto moved = values(wte->weight.detach() - before);
  for (const double d : moved) EXPECT_NEAR(std::abs(d), 0.01, 1e-4);  // Adam's first step is lr * sign(g)

  // Saved under both names with the same values, and loaded back into the one tensor.
  const auto dir = std::filesystem::temp_directory_path() / "strata_tied_weights_test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "model.safetensors").string();
  io::TensorMap saved;
  for (const auto& [name, t] : model->state_dict()) saved.emplace(name, t);
  io::save_safetensors(path, saved);
  const io::TensorMap loaded = io::load_safetensors(path).tensors;
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(values(loaded.at("0.weight")), values(loaded.at("1.weight")));
  EXPECT_EQ(values(loaded.at("0.weight")), values(wte->weight));
  nn::StateDict dict;
  for (const auto& [name, t] : loaded) dict.insert(name, t);
  {
    NoGradGuard no_grad;
    wte->weight.fill_(0);
  }
  model->load_state_dict(dict);
  EXPECT_TRUE(head->weight.is_same(wte->weight));
  EXPECT_EQ(values(head->weight), values(loaded.at("0.weight")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata
