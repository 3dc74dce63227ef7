// Module: registration, dotted names, modes, state dicts, and moves that keep the tensors' identity.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/nn/layers.h"
#include "strata/nn/module.h"
#include "strata/optim/sgd.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_devices.h"

namespace strata {
namespace {

using nn::Linear;
using nn::Module;
using nn::Sequential;
using nn::StateDict;

// A module with a parameter, a buffer and a child, like a user-written block.
class Block : public nn::Layer {
 public:
  explicit Block(TensorOptions options = {}) : Layer("Block") {
    scale = register_parameter("scale", ones({3}, options));
    count = register_buffer("count", zeros({}, TensorOptions(DType::I64).device(options.device_)));
    fc = register_module("fc", std::make_shared<Linear>(3, 2, true, options));
  }
  Tensor forward(const Tensor& x) override { return (*fc)(x * scale); }

  Tensor scale, count;
  std::shared_ptr<Linear> fc;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) out.push_back(item.first);
  return out;
}

std::vector<float> values(const Tensor& t) { return t.cpu().to(DType::F32).contiguous().to_vector<float>(); }

class ModuleOnDevice : public ::testing::TestWithParam<Device> {};

TEST(Module, NamedParametersAreDottedAndInRegistrationOrder) {
  Sequential model(Block(), nn::ReLU(), Linear(2, 4));
  EXPECT_EQ(names_of(model.named_parameters()),
            (std::vector<std::string>{"0.scale", "0.fc.weight", "0.fc.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(names_of(model.named_parameters(/*recurse=*/false)), std::vector<std::string>{});
  EXPECT_EQ(names_of(model.named_buffers()), std::vector<std::string>{"0.count"});
  EXPECT_EQ(model.parameters().size(), 5u);
}

TEST(Module, ParametersAreTheLayersOwnHandles) {
  Linear fc(3, 2);
  const auto params = fc.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_TRUE(params[0].is_same(fc.weight));
  EXPECT_TRUE(params[1].is_same(fc.bias));
  EXPECT_TRUE(fc.weight.requires_grad());
}

TEST(Module, NamedModulesAndChildren) {
  Sequential model{Block(), nn::Tanh()};
  std::vector<std::string> names;
  for (const auto& [name, m] : model.named_modules()) names.push_back(name + ":" + m->type_name());
  EXPECT_EQ(names, (std::vector<std::string>{":Sequential", "0:Block", "0.fc:Linear", "1:Tanh"}));
  EXPECT_EQ(model.children().size(), 2u);
  EXPECT_EQ(model[0]->path(), "0");
  EXPECT_EQ(model.at<Block>(0)->fc->path(), "0.fc");
}

TEST(Module, RegisteringATakenNameThrows) {
  Module m("M");
  m.register_parameter("w", zeros({2}));
  EXPECT_THROW(m.register_buffer("w", zeros({2})), InvalidArgumentError);
  EXPECT_THROW(m.register_parameter("a.b", zeros({2})), InvalidArgumentError);
}

TEST(Module, TrainAndEvalRecurse) {
  Sequential model{Block(), Sequential(nn::ReLU())};
  EXPECT_TRUE(model.is_training());
  model.eval();
  for (const auto& [name, m] : model.named_modules()) EXPECT_FALSE(m->is_training()) << name;
  model.train();
  for (const auto& [name, m] : model.named_modules()) EXPECT_TRUE(m->is_training()) << name;
}

TEST(Module, ZeroGradDropsOrZeroesGradients) {
  Linear fc(2, 1);
  sum(fc(ones({1, 2}))).backward();
  ASSERT_TRUE(fc.weight.grad().defined());
  fc.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(values(fc.weight.grad()), (std::vector<float>{0, 0}));
  fc.zero_grad();
  EXPECT_FALSE(fc.weight.grad().defined());
}

TEST(Module, StateDictHoldsParametersThenBuffers) {
  Block block;
  EXPECT_EQ(block.state_dict().keys(), (std::vector<std::string>{"scale", "count", "fc.weight", "fc.bias"}));
  EXPECT_TRUE(block.state_dict().at("fc.weight").is_same(block.fc->weight));
}

TEST(Module, StateDictRoundTripCopiesValues) {
  manual_seed(1);
  Block a;
  manual_seed(2);
  Block b;
  StateDict saved;
  for (const auto& [name, t] : a.state_dict()) saved.insert(name, t.clone());
  const Tensor weight_handle = b.fc->weight;
  b.load_state_dict(saved);
  EXPECT_TRUE(b.fc->weight.is_same(weight_handle));  // copied into, not replaced
  for (const auto& [name, t] : b.state_dict()) EXPECT_EQ(values(t), values(saved.at(name))) << name;
  // The copy is deep: changing the source afterwards does not reach the module.
  Tensor(saved.at("scale")).fill_(7.0);
  EXPECT_EQ(values(b.scale), (std::vector<float>{1, 1, 1}));
}

TEST(Module, LoadStateDictErrorsListEveryProblemAndChangeNothing) {
  Block block;
  const std::vector<float> before = values(block.fc->weight);
  StateDict dict;
  dict.insert("scale", zeros({4}));          // mis-shaped
  dict.insert("fc.weight", zeros({2, 3}));   // fine
  dict.insert("extra", zeros({1}));          // unexpected
  // "count" and "fc.bias" are missing.
  try {
    block.load_state_dict(dict);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("missing keys: count, fc.bias"), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected keys: extra"), std::string::npos) << message;
    EXPECT_NE(message.find("scale (checkpoint [4], module [3])"), std::string::npos) << message;
  }
  EXPECT_EQ(values(block.fc->weight), before);
  EXPECT_EQ(values(block.scale), (std::vector<float>{1, 1, 1}));
}

TEST(Module, NonStrictLoadSkipsMissingAndUnexpectedButNotMisshaped) {
  Block block;
  StateDict dict;
  dict.insert("scale", full({3}, 2.0));
  dict.insert("extra", zeros({1}));
  block.load_state_dict(dict, /*strict=*/false);
  EXPECT_EQ(values(block.scale), (std::vector<float>{2, 2, 2}));
  dict.insert("fc.bias", zeros({5}));
  EXPECT_THROW(block.load_state_dict(dict, false), InvalidArgumentError);
}

TEST(Module, ToDTypeKeepsIdentityAndConvertsGradients) {
  Block block;
  const Tensor weight = block.fc->weight;  // a handle taken before the move
  sum(block(ones({1, 3}))).backward();
  block.to(DType::F64);
  EXPECT_EQ(weight.dtype(), DType::F64);
  EXPECT_TRUE(weight.is_same(block.parameters()[1]));
  EXPECT_EQ(weight.grad().dtype(), DType::F64);
  EXPECT_TRUE(weight.requires_grad());
  EXPECT_EQ(block.count.dtype(), DType::I64);  // integer buffers are left alone
  EXPECT_EQ(block(ones({1, 3}, DType::F64)).dtype(), DType::F64);
}

TEST(Module, OptimizerBuiltBeforeAToDTypeStillTrains) {
  Linear fc(1, 1);
  optim::SGD sgd(fc.parameters(), optim::SGDOptions(0.1).momentum(0.5));
  sum(fc(ones({1, 1}))).backward();
  sgd.step();  // the momentum buffers are f32 now
  fc.to(DType::F64);
  const Tensor x = tensor<double>({1.0, 2.0, 3.0}, {3, 1});
  const Tensor y = tensor<double>({2.0, 4.0, 6.0}, {3, 1});
  for (int i = 0; i < 200; ++i) {
    sgd.zero_grad();
    Tensor d = fc(x) - y;
    mean(d * d).backward();
    sgd.step();
  }
  EXPECT_NEAR(fc.weight.item<double>(), 2.0, 1e-2);
  EXPECT_EQ(sgd.params()[0].dtype(), DType::F64);
  EXPECT_EQ(sgd.state(0).tensors.at("momentum_buffer").dtype(), DType::F64);
}

TEST_P(ModuleOnDevice, ToDeviceKeepsIdentityAndAnOptimizerStillTrains) {
  const Device device = GetParam();
  manual_seed(3);
  Linear fc(1, 1);
  const Tensor weight = fc.weight;
  optim::SGD sgd(fc.parameters(), optim::SGDOptions(0.1).momentum(0.5));
  sum(fc(ones({1, 1}))).backward();
  sgd.step();  // momentum state now lives on the CPU
  fc.to(device);
  EXPECT_EQ(weight.device(), device);
  EXPECT_EQ(fc.weight.grad().device(), device);
  const Tensor x = tensor<float>({1.0f, 2.0f, 3.0f}, {3, 1}, device);
  const Tensor y = tensor<float>({3.0f, 5.0f, 7.0f}, {3, 1}, device);
  for (int i = 0; i < 300; ++i) {
    sgd.zero_grad();
    Tensor d = fc(x) - y;
    mean(d * d).backward();
    sgd.step();
  }
  EXPECT_NEAR(weight.item<float>(), 2.0f, 1e-2);
  EXPECT_NEAR(fc.bias.item<float>(), 1.0f, 2e-2);
  EXPECT_EQ(sgd.state(0).tensors.at("momentum_buffer").device(), device);
}

TEST_P(ModuleOnDevice, ForwardOnAnotherDeviceNamesTheModuleAndParameter) {
  const Device device = GetParam();
  if (device == kCPU) GTEST_SKIP() << "needs a device other than cpu (another CPU device counts)";
  Sequential model(Linear(2, 2), Linear(2, 2));
  model.to(device);
  try {
    model(ones({1, 2}));
    FAIL() << "expected DeviceMismatchError";
  } catch (const DeviceMismatchError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Linear '0'"), std::string::npos) << message;
    EXPECT_NE(message.find("parameter 'weight'"), std::string::npos) << message;
  }
}

// A tensor that only claims to live on cuda:0 (no memory): enough for the device check, which runs before any op.
Tensor on_fake_gpu(const Shape& shape) {
  auto storage = std::make_shared<Storage>();
  storage->device = Device(DeviceType::CUDA, 0);
  return Tensor(storage, DType::F32, shape, contiguous_strides(shape), 0);
}

TEST(Module, ForwardChecksTheInputDeviceBeforeRunning) {
  Sequential model(nn::ReLU(), Sequential(Linear(2, 2)));
  model.at<Sequential>(1)->at<Linear>(0)->weight.set_data(on_fake_gpu({2, 2}));
  try {
    model(ones({1, 2}));
    FAIL() << "expected DeviceMismatchError";
  } catch (const DeviceMismatchError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Linear '1.0'"), std::string::npos) << message;
    EXPECT_NE(message.find("parameter 'weight' is on cuda:0"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ModuleOnDevice, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

TEST(Module, AModuleCannotHoldItself) {
  auto a = std::make_shared<nn::Sequential>();
  auto b = std::make_shared<nn::Sequential>();
  a->push_back(b);
  try {
    b->push_back(a);
    FAIL() << "a cycle was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("would make the module tree a cycle"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a->push_back(a), InvalidArgumentError);
  EXPECT_TRUE(a->parameters().empty());  // the traversal ends
}

}  // namespace
}  // namespace strata
