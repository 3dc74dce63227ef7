// Optimizers and schedulers against PyTorch's documented update formulas, state round trips, and models that learn.
// The expected numbers come from the formulas in sgd.h/adam.h evaluated by hand (in f64) for a 2-element
// parameter starting at [1, -2] with the gradients [0.5, -1], [0.25, 0.5], [-1, 2] on steps 1, 2, 3.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/layers.h"
#include "strata/optim/adam.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

using Steps = std::vector<std::vector<double>>;
using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

const Steps kGrads = {{0.5, -1.0}, {0.25, 0.5}, {-1.0, 2.0}};

class OptimOnDevice : public ::testing::TestWithParam<Device> {
 protected:
  // Runs three steps with the fixed gradients and compares the parameter after each.
  void expect_steps(const MakeOptimizer& make, const Steps& expected) {
    const Device device = GetParam();
    Tensor p = tensor<double>({1.0, -2.0}, {}, device);
    p.requires_grad_();
    auto optimizer = make({p});
    for (std::size_t s = 0; s < kGrads.size(); ++s) {
      p.set_grad(tensor<double>(kGrads[s], {}, device));
      optimizer->step();
      const auto got = p.cpu().to_vector<double>();
      for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(got[i], expected[s][i], 1e-9) << "step " << s + 1;
    }
  }
};

template <typename O, typename Options>
MakeOptimizer make(Options options) {
  return [options](std::vector<Tensor> params) { return std::make_unique<O>(std::move(params), options); };
}

TEST_P(OptimOnDevice, SgdPlain) {
  expect_steps(make<optim::SGD>(optim::SGDOptions(0.1)), {{0.95, -1.9}, {0.925, -1.95}, {1.025, -2.15}});
}

TEST_P(OptimOnDevice, SgdMomentum) {
  expect_steps(make<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9)),
               {{0.95, -1.9}, {0.88, -1.86}, {0.917, -2.024}});
}

TEST_P(OptimOnDevice, SgdNesterov) {
  expect_steps(make<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).nesterov(true)),
               {{0.905, -1.81}, {0.817, -1.824}, {0.9503, -2.1716}});
}

TEST_P(OptimOnDevice, SgdDampeningAndWeightDecay) {
  expect_steps(make<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01)),
               {{0.949, -1.898}, {0.8797459, -1.8494918}, {0.90662543869, -1.98416987738}});
}

TEST_P(OptimOnDevice, Adam) {
  expect_steps(make<optim::Adam>(optim::AdamOptions(0.1)),
               {{0.900000002, -1.900000001},
                {0.8067820404774624, -1.873366297370903},
                {0.8274177428854115, -1.9190994760260234}});
}

TEST_P(OptimOnDevice, AdamL2WeightDecay) {
  expect_steps(make<optim::Adam>(optim::AdamOptions(0.1).weight_decay(0.1)),
               {{0.9000000016666666, -1.9000000008333333},
                {0.8050097658613199, -1.8537472646427609},
                {0.8120982607786772, -1.88636311586399}});
}

TEST_P(OptimOnDevice, AdamWDecoupledWeightDecay) {
  expect_steps(make<optim::AdamW>(optim::AdamOptions(0.1).weight_decay(0.1)),
               {{0.890000002, -1.880000001},
                {0.7878820404574624, -1.8345662973609032},
                {0.8006389224608368, -1.8619538130424145}});
}

TEST_P(OptimOnDevice, AdamWDefaultsToPyTorchsWeightDecay) {
  // lr 0.1, weight_decay 0.01: the first step is p * (1 - 0.001) - 0.1 * g / |g| (up to eps).
  expect_steps(make<optim::AdamW>(optim::AdamOptions(0.1)),
               {{0.899000002, -1.898000001},
                {0.8048830404754623, -1.869468297369903},
                {0.824713859842936, -1.9133320077276534}});
}

TEST_P(OptimOnDevice, ParametersWithoutGradientAreLeftAlone) {
  Tensor a = tensor<double>({1.0}, {}, GetParam());
  Tensor b = tensor<double>({2.0}, {}, GetParam());
  a.requires_grad_();
  b.requires_grad_();
  optim::Adam adam({a, b}, optim::AdamOptions(0.1));
  a.set_grad(tensor<double>({1.0}, {}, GetParam()));
  adam.step();
  EXPECT_EQ(b.item<double>(), 2.0);
  EXPECT_TRUE(adam.state(1).tensors.empty());
  EXPECT_EQ(adam.state(0).step, 1);
}

// Trains a model for a few steps, checkpoints model and optimizer, and checks that a fresh model and optimizer
// restored from the checkpoint take exactly the same next step as the original.
void expect_resume_is_exact(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make_opt,
                            Device device) {
  manual_seed(11);
  const Tensor x = randn({8, 3}).to(device);
  const Tensor y = randn({8, 2}).to(device);
  const auto train_step = [&](nn::Sequential& model, optim::Optimizer& opt) {
    opt.zero_grad();
    Tensor d = model(x) - y;
    mean(d * d).backward();
    opt.step();
  };
  const auto make_model = [&] {
    nn::Sequential model(nn::Linear(3, 4), nn::Tanh(), nn::Linear(4, 2));
    model.to(device);
    return model;
  };
  manual_seed(1);
  nn::Sequential original = make_model();
  auto opt = make_opt(original.parameters());
  for (int i = 0; i < 3; ++i) train_step(original, *opt);
  nn::StateDict model_state;
  for (const auto& [name, t] : original.state_dict()) model_state.insert(name, t.clone());
  const nn::StateDict opt_state = opt->state_dict();

  manual_seed(2);
  nn::Sequential resumed = make_model();
  auto resumed_opt = make_opt(resumed.parameters());
  resumed.load_state_dict(model_state);
  resumed_opt->load_state_dict(opt_state);
  EXPECT_EQ(resumed_opt->lr(), opt->lr());

  train_step(original, *opt);
  train_step(resumed, *resumed_opt);
  const auto a = original.parameters();
  const auto b = resumed.parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].cpu().to_vector<float>(), b[i].cpu().to_vector<float>()) << "parameter " << i;
  }
}

TEST_P(OptimOnDevice, SgdStateDictResumesExactly) {
  expect_resume_is_exact(make<optim::SGD>(optim::SGDOptions(0.05).momentum(0.9).nesterov(true)), GetParam());
}

TEST_P(OptimOnDevice, AdamStateDictResumesExactly) {
  expect_resume_is_exact(make<optim::AdamW>(optim::AdamOptions(0.01).weight_decay(0.1)), GetParam());
}

TEST_P(OptimOnDevice, XorIsLearned) {
  const Device device = GetParam();
  manual_seed(0);
  nn::Sequential model(nn::Linear(2, 8), nn::Tanh(), nn::Linear(8, 1));
  model.to(device);
  const Tensor x = tensor<float>({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2}, device);
  const Tensor y = tensor<float>({0, 1, 1, 0}, {4, 1}, device);
  optim::Adam adam(model.parameters(), optim::AdamOptions(0.05));
  double loss = 1.0;
  for (int i = 0; i < 500; ++i) {
    adam.zero_grad();
    Tensor d = model(x) - y;
    Tensor l = mean(d * d);  // hand-written MSE
    l.backward();
    adam.step();
    loss = l.item<double>();
  }
  EXPECT_LT(loss, 0.01);
}

TEST_P(OptimOnDevice, LinearRegressionFindsTheKnownSolution) {
  const Device device = GetParam();
  manual_seed(5);
  const Tensor x = randn({64, 3}).to(device);
  const Tensor w = tensor<float>({1.0f, -2.0f, 0.5f}, {3, 1}, device);
  const Tensor y = matmul(x, w) + 0.3;
  nn::Linear fc(nn::LinearOptions(3, 1).device(device));
  optim::SGD sgd(fc.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int i = 0; i < 300; ++i) {
    sgd.zero_grad();
    Tensor d = fc(x) - y;
    mean(d * d).backward();
    sgd.step();
  }
  const auto weight = fc.weight.cpu().to_vector<float>();
  EXPECT_NEAR(weight[0], 1.0f, 1e-3);
  EXPECT_NEAR(weight[1], -2.0f, 1e-3);
  EXPECT_NEAR(weight[2], 0.5f, 1e-3);
  EXPECT_NEAR(fc.bias.item<float>(), 0.3f, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Devices, OptimOnDevice, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(Optim, LoadStateDictRejectsBadKeysAndShapesWithoutChangingAnything) {
  Tensor p = zeros({2});
  p.requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.1).momentum(0.9));
  p.set_grad(ones({2}));
  sgd.step();
  nn::StateDict bad;
  bad.insert("lr", scalar_tensor(0.5, DType::F64));
  bad.insert("0.momentum_buffer", zeros({3}));
  bad.insert("1.momentum_buffer", zeros({2}));
  bad.insert("0.velocity", zeros({2}));
  try {
    sgd.load_state_dict(bad);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'0.momentum_buffer' has shape [3] but parameter 0 has shape [2]"), std::string::npos)
        << message;
    EXPECT_NE(message.find("'1.momentum_buffer'"), std::string::npos) << message;
    EXPECT_NE(message.find("'0.velocity'"), std::string::npos) << message;
  }
  EXPECT_EQ(sgd.lr(), 0.1);
  EXPECT_EQ(sgd.state(0).tensors.at("momentum_buffer").to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(Optim, StateDictNamesStateByParameterIndex) {
  Tensor p = zeros({2});
  p.requires_grad_();
  optim::Adam adam({p}, optim::AdamOptions(0.1));
  p.set_grad(ones({2}));
  adam.step();
  EXPECT_EQ(adam.state_dict().keys(), (std::vector<std::string>{"lr", "0.exp_avg", "0.exp_avg_sq", "0.step"}));
  EXPECT_EQ(adam.state_dict().at("0.step").item<int64_t>(), 1);
}

TEST(Optim, RejectsBadHyperparameters) {
  Tensor p = zeros({2});
  p.requires_grad_();
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(-1.0)), InvalidArgumentError);
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)), InvalidArgumentError);
  EXPECT_THROW(optim::Adam({p}, optim::AdamOptions(0.1).betas(1.0, 0.9)), InvalidArgumentError);
  EXPECT_THROW(optim::SGD({zeros({2}, DType::I64)}, 0.1), DTypeError);
  // Infinite or NaN factors would turn every parameter into NaN at the first step.
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(0.1).momentum(inf)), InvalidArgumentError);
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(nan)), InvalidArgumentError);
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(0.1).weight_decay(inf)), InvalidArgumentError);
  EXPECT_THROW(optim::Adam({p}, optim::AdamOptions(0.1).eps(inf)), InvalidArgumentError);
  EXPECT_THROW(optim::Adam({p}, optim::AdamOptions(0.1).weight_decay(nan)), InvalidArgumentError);
  // A parameter listed twice would be stepped twice.
  EXPECT_THROW(optim::SGD({p, p}, 0.5), InvalidArgumentError);
}

TEST(Optim, ASharedModuleIsSteppedOnce) {
  auto shared = std::make_shared<nn::Linear>(2, 2);
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(shared);
  net->push_back(shared);  // tied weights
  EXPECT_EQ(net->parameters().size(), 2u);
  EXPECT_EQ(net->named_parameters().size(), 4u);  // both names stay, as in a state dict
  EXPECT_NO_THROW(optim::SGD(net->parameters(), 0.1));
}

std::vector<double> lrs(optim::LRScheduler& scheduler, optim::Optimizer& opt, int epochs) {
  std::vector<double> out{opt.lr()};
  for (int e = 1; e < epochs; ++e) {
    scheduler.step();
    out.push_back(opt.lr());
  }
  return out;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << "epoch " << i;
}

TEST(OptimScheduler, StepLRDecaysEveryStepSizeEpochs) {
  Tensor p = zeros({1});
  p.requires_grad_();
  optim::SGD sgd({p}, 1.0);
  optim::StepLR scheduler(sgd, 2, 0.5);
  expect_near(lrs(scheduler, sgd, 6), {1.0, 1.0, 0.5, 0.5, 0.25, 0.25});
}

TEST(OptimScheduler, CosineAnnealingFollowsTheHalfCosine) {
  Tensor p = zeros({1});
  p.requires_grad_();
  optim::SGD sgd({p}, 1.0);
  optim::CosineAnnealingLR scheduler(sgd, 4, 0.0);
  expect_near(lrs(scheduler, sgd, 5), {1.0, 0.8535533905932737, 0.5, 0.14644660940672627, 0.0});
}

TEST(OptimScheduler, StateDictResumesTheSequence) {
  Tensor p = zeros({1});
  p.requires_grad_();
  optim::SGD sgd({p}, 0.1);
  optim::CosineAnnealingLR scheduler(sgd, 10, 0.01);
  for (int e = 0; e < 3; ++e) scheduler.step();
  const nn::StateDict saved = scheduler.state_dict();
  scheduler.step();
  const double next = sgd.lr();

  optim::SGD sgd2({p}, 0.7);
  optim::CosineAnnealingLR resumed(sgd2, 10, 0.01);
  resumed.load_state_dict(saved);
  EXPECT_EQ(resumed.last_epoch(), 3);
  resumed.step();
  EXPECT_DOUBLE_EQ(sgd2.lr(), next);
}

TEST(Optim, PartialOrMissingStateIsATypedError) {
  Tensor p = zeros({2});
  p.requires_grad_();
  optim::SGD sgd({p}, 0.1);
  EXPECT_THROW((void)sgd.state(5), IndexError);
  // Adam's state for a parameter is both moments or neither: a step would otherwise find one missing.
  optim::Adam adam({p}, optim::AdamOptions(0.1));
  nn::StateDict half;
  half.insert("lr", scalar_tensor(0.1, DType::F64));
  half.insert("0.exp_avg", zeros({2}));
  try {
    adam.load_state_dict(half);
    FAIL() << "half a state was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'0.exp_avg_sq' missing"), std::string::npos) << e.what();
  }
  p.set_grad(ones({2}));
  adam.step();  // the refused load left the optimizer as it was
  EXPECT_EQ(adam.state(0).step, 1);
}

TEST(Optim, AdamMomentsWithoutTheirStepCountAreRefused) {
  Tensor p = zeros({2});
  p.requires_grad_();
  optim::Adam trained({p}, optim::AdamOptions(0.1));
  p.set_grad(ones({2}));
  trained.step();
  nn::StateDict no_step;
  for (const auto& [key, t] : trained.state_dict()) {
    if (key != "0.step") no_step.insert(key, t);
  }
  optim::Adam adam({p}, optim::AdamOptions(0.1));
  try {
    adam.load_state_dict(no_step);
    FAIL() << "moments without a step count were accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 0 has exp_avg and exp_avg_sq but no step count: '0.step' is "
                                         "missing"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(adam.state(0).tensors.empty());
  nn::StateDict only_step;
  only_step.insert("lr", scalar_tensor(0.1, DType::F64));
  only_step.insert("0.step", scalar_tensor(int64_t{4}, DType::I64));
  EXPECT_THROW(adam.load_state_dict(only_step), InvalidArgumentError);
}

TEST(OptimScheduler, ABadStateDictIsRefusedAndChangesNothing) {
  Tensor p = zeros({1});
  p.requires_grad_();
  optim::SGD sgd({p}, 0.1);
  optim::StepLR scheduler(sgd, 2, 0.5);
  const auto load = [&](Tensor epoch, Tensor base) {
    nn::StateDict d;
    d.insert("last_epoch", std::move(epoch));
    d.insert("base_lr", std::move(base));
    scheduler.load_state_dict(d);
  };
  const Tensor base = scalar_tensor(0.1, DType::F64);
  // step() would overflow after the largest int64.
  EXPECT_THROW(load(scalar_tensor(std::numeric_limits<int64_t>::max(), DType::I64), base), InvalidArgumentError);
  EXPECT_THROW(load(scalar_tensor(2.7, DType::F64), base), InvalidArgumentError);
  EXPECT_THROW(load(scalar_tensor(7, DType::I64), scalar_tensor(-1.0, DType::F64)), InvalidArgumentError);
  EXPECT_EQ(scheduler.last_epoch(), 0);
  EXPECT_EQ(scheduler.base_lr(), 0.1);
  // Arguments that give a negative or NaN rate later are refused when the scheduler is made.
  EXPECT_THROW(optim::StepLR(sgd, 2, -0.5), InvalidArgumentError);
  EXPECT_THROW(optim::CosineAnnealingLR(sgd, 4, -0.01), InvalidArgumentError);
  EXPECT_THROW(optim::CosineAnnealingLR(sgd, 4, std::numeric_limits<double>::quiet_NaN()), InvalidArgumentError);
  EXPECT_EQ(sgd.lr(), 0.1);
  load(scalar_tensor(3, DType::I64), base);
  EXPECT_EQ(scheduler.last_epoch(), 3);
}

}  // namespace
}  // namespace strata
