// Parameter groups: each group's learning rate and weight decay in SGD, Adam and AdamW, the schedulers scaling every
// group from its own base, and the state dicts that save them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/optim/adam.h"
#include "strata/optim/lr_scheduler.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"

namespace strata {
namespace {

Tensor param(double value) {
  Tensor p = tensor<double>({value}, {}, kCPU);
  p.requires_grad_();
  p.set_grad(tensor<double>({1.0}, {}, kCPU));
  return p;
}

double value(const Tensor& p) { return p.item<double>(); }

TEST(ParamGroups, SgdUsesEachGroupsLearningRateAndWeightDecay) {
  Tensor a = param(1.0), b = param(1.0), c = param(1.0);
  optim::SGD sgd({{.params = {a}}, {.params = {b}, .lr = 0.5}, {.params = {c}, .weight_decay = 1.0}},
                 optim::SGDOptions(0.1));
  EXPECT_EQ(sgd.groups().size(), 3u);
  EXPECT_EQ(sgd.params().size(), 3u);
  sgd.step();
  EXPECT_DOUBLE_EQ(value(a), 1.0 - 0.1);
  EXPECT_DOUBLE_EQ(value(b), 1.0 - 0.5);
  EXPECT_DOUBLE_EQ(value(c), 1.0 - 0.1 * (1.0 + 1.0 * 1.0));  // g + wd * p
}

TEST(ParamGroups, AGroupsWeightDecayOverridesTheOptions) {
  Tensor a = param(2.0), b = param(2.0);
  optim::SGD sgd({{.params = {a}}, {.params = {b}, .weight_decay = 0.0}}, optim::SGDOptions(0.1).weight_decay(0.5));
  sgd.step();
  EXPECT_DOUBLE_EQ(value(a), 2.0 - 0.1 * (1.0 + 0.5 * 2.0));
  EXPECT_DOUBLE_EQ(value(b), 2.0 - 0.1);
}

TEST(ParamGroups, AdamUsesEachGroupsLearningRate) {
  Tensor a = param(1.0), b = param(1.0);
  optim::Adam adam({{.params = {a}}, {.params = {b}, .lr = 0.01}}, optim::AdamOptions(0.1));
  adam.step();
  // The first Adam step moves by about lr (m / sqrt(v) = 1 after bias correction).
  EXPECT_NEAR(value(a), 1.0 - 0.1, 1e-6);
  EXPECT_NEAR(value(b), 1.0 - 0.01, 1e-6);
}

TEST(ParamGroups, AdamWDecaysEachGroupWithItsOwnRate) {
  Tensor a = param(1.0), b = param(1.0);
  optim::AdamW adamw({{.params = {a}}, {.params = {b}, .weight_decay = 0.0}}, optim::AdamOptions(0.1));
  adamw.step();
  EXPECT_NEAR(value(a), 1.0 * (1.0 - 0.1 * 0.01) - 0.1, 1e-6);  // PyTorch's default 0.01 for AdamW
  EXPECT_NEAR(value(b), 1.0 - 0.1, 1e-6);
}

TEST(ParamGroups, SchedulersScaleEveryGroupFromItsOwnBase) {
  Tensor a = param(1.0), b = param(1.0);
  optim::SGD sgd({{.params = {a}}, {.params = {b}, .lr = 1.0}}, optim::SGDOptions(0.1));
  optim::StepLR scheduler(sgd, 1, 0.5);
  EXPECT_EQ(scheduler.base_lrs(), (std::vector<double>{0.1, 1.0}));
  scheduler.step();
  EXPECT_DOUBLE_EQ(sgd.groups()[0].lr, 0.05);
  EXPECT_DOUBLE_EQ(sgd.groups()[1].lr, 0.5);
  EXPECT_EQ(scheduler.last_lrs(), (std::vector<double>{0.05, 0.5}));
  optim::SGD sgd2({{.params = {param(0)}}, {.params = {param(0)}, .lr = 1.0}}, optim::SGDOptions(0.1));
  optim::CosineAnnealingLR cosine(sgd2, 2);
  cosine.step();
  EXPECT_DOUBLE_EQ(sgd2.groups()[0].lr, 0.05);
  EXPECT_DOUBLE_EQ(sgd2.groups()[1].lr, 0.5);
}

TEST(ParamGroups, StateDictsKeepEveryGroupsLearningRate) {
  Tensor a = param(1.0), b = param(1.0);
  optim::SGD sgd({{.params = {a}}, {.params = {b}, .lr = 1.0}}, optim::SGDOptions(0.1).momentum(0.9));
  optim::StepLR scheduler(sgd, 1, 0.5);
  sgd.step();
  scheduler.step();
  const nn::StateDict opt_state = sgd.state_dict(), sched_state = scheduler.state_dict();
  EXPECT_TRUE(opt_state.contains("lr.1"));
  EXPECT_TRUE(sched_state.contains("base_lr.1"));

  Tensor a2 = param(1.0), b2 = param(1.0);
  optim::SGD sgd2({{.params = {a2}}, {.params = {b2}, .lr = 1.0}}, optim::SGDOptions(0.1).momentum(0.9));
  optim::StepLR scheduler2(sgd2, 1, 0.5);
  sgd2.load_state_dict(opt_state);
  scheduler2.load_state_dict(sched_state);
  EXPECT_DOUBLE_EQ(sgd2.groups()[0].lr, 0.05);
  EXPECT_DOUBLE_EQ(sgd2.groups()[1].lr, 0.5);
  scheduler2.step();
  EXPECT_DOUBLE_EQ(sgd2.groups()[1].lr, 0.25);

  // A one-group optimizer refuses a dict with a second group's learning rate, and the other way round.
  optim::SGD one({param(0)}, optim::SGDOptions(0.1).momentum(0.9));
  nn::StateDict two_groups;
  two_groups.insert("lr", scalar_tensor(0.1, DType::F64));
  two_groups.insert("lr.1", scalar_tensor(0.1, DType::F64));
  EXPECT_THROW(one.load_state_dict(two_groups), InvalidArgumentError);
  nn::StateDict one_group;
  one_group.insert("lr", scalar_tensor(0.1, DType::F64));
  EXPECT_THROW(sgd2.load_state_dict(one_group), InvalidArgumentError);
}

TEST(ParamGroups, SetLrSetsEveryGroupAndSetGroupLrOne) {
  optim::SGD sgd({{.params = {param(0)}}, {.params = {param(0)}, .lr = 1.0}}, optim::SGDOptions(0.1));
  sgd.set_group_lr(1, 0.3);
  EXPECT_DOUBLE_EQ(sgd.groups()[1].lr, 0.3);
  EXPECT_DOUBLE_EQ(sgd.lr(), 0.1);
  sgd.set_lr(0.2);
  EXPECT_DOUBLE_EQ(sgd.groups()[0].lr, 0.2);
  EXPECT_DOUBLE_EQ(sgd.groups()[1].lr, 0.2);
  EXPECT_THROW(sgd.set_group_lr(2, 0.1), IndexError);
  EXPECT_THROW(sgd.set_group_lr(0, -1.0), InvalidArgumentError);
  EXPECT_THROW(sgd.set_group_weight_decay(0, -1.0), InvalidArgumentError);
}

TEST(ParamGroups, BadGroupsAreRefused) {
  Tensor a = param(0);
  EXPECT_THROW(optim::SGD({{.params = {a}}, {.params = {a}}}, optim::SGDOptions(0.1)), InvalidArgumentError);
  EXPECT_THROW(optim::SGD({{.params = {param(0)}, .lr = -0.1}}, optim::SGDOptions(0.1)), InvalidArgumentError);
  EXPECT_THROW(optim::Adam({{.params = {param(0)}, .weight_decay = -1.0}}), InvalidArgumentError);
  EXPECT_THROW(optim::SGD(std::vector<optim::ParamGroup>{}, optim::SGDOptions(0.1)), InvalidArgumentError);
}

TEST(ParamGroups, AddParamGroupStepsTheNewGroupWithItsOwnOrTheDefaultLearningRate) {
  Tensor a = param(1.0), b = param(1.0), c = param(1.0);
  optim::SGD sgd({a}, optim::SGDOptions(0.1).momentum(0.9));
  sgd.step();  // a has momentum state before the groups arrive
  sgd.add_param_group({.params = {b}, .lr = 0.5});
  sgd.add_param_group({.params = {c}, .weight_decay = 1.0});
  ASSERT_EQ(sgd.groups().size(), 3u);
  EXPECT_EQ(sgd.params().size(), 3u);
  EXPECT_DOUBLE_EQ(sgd.groups()[2].lr, 0.1);  // the optimizer's own
  sgd.step();
  EXPECT_DOUBLE_EQ(value(a), 1.0 - 0.1 - 0.1 * (0.9 + 1.0));  // the second step with momentum 0.9
  EXPECT_DOUBLE_EQ(value(b), 1.0 - 0.5);                      // a first step: no momentum yet
  EXPECT_DOUBLE_EQ(value(c), 1.0 - 0.1 * (1.0 + 1.0 * 1.0));
  EXPECT_TRUE(sgd.state_dict().contains("lr.2"));
}

TEST(ParamGroups, ASchedulerLeavesAGroupAddedAfterItAlone) {
  Tensor a = param(1.0), b = param(1.0);
  optim::SGD sgd({a}, optim::SGDOptions(0.1));
  optim::StepLR scheduler(sgd, 1, 0.5);
  sgd.add_param_group({.params = {b}, .lr = 1.0});
  scheduler.step();
  EXPECT_DOUBLE_EQ(sgd.groups()[0].lr, 0.05);
  EXPECT_DOUBLE_EQ(sgd.groups()[1].lr, 1.0);
}

TEST(ParamGroups, ARefusedGroupLeavesTheOptimizerAsItWas) {
  Tensor a = param(0), b = param(0);
  optim::SGD sgd({a}, optim::SGDOptions(0.1));
  EXPECT_THROW(sgd.add_param_group({.params = {b, a}}), InvalidArgumentError);  // a is already optimised
  EXPECT_THROW(sgd.add_param_group({.params = {b, b}}), InvalidArgumentError);
  EXPECT_THROW(sgd.add_param_group({.params = {b}, .lr = -1.0}), InvalidArgumentError);
  EXPECT_THROW(sgd.add_param_group({.params = {tensor<int64_t>({1}, {}, kCPU)}}), DTypeError);
  EXPECT_THROW(sgd.add_param_group({}), InvalidArgumentError);
  EXPECT_EQ(sgd.groups().size(), 1u);
  EXPECT_EQ(sgd.params().size(), 1u);
  try {
    sgd.add_param_group({.params = {b, a}});
    ADD_FAILURE() << "a parameter the optimizer already has was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("parameters 0 and 2 are the same tensor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
