#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <limits>
#include <random>

#include "strata/core/error.h"
#include "strata/io/safetensors.h"
#include "strata/tensor/factories.h"
#include "test_devices.h"
#include "test_files.h"
#include "trainer.h"

namespace strata {
namespace {

using train::Recipe;
using train::Trainer;
using train::TrainOptions;

// n 28x28 u8 images in 10 classes that a small CNN separates quickly: class k is a bright bar on rows 2k+2..2k+4
// over noise.
std::shared_ptr<data::TensorDataset> bars(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> pixels(static_cast<std::size_t>(n * 28 * 28));
  std::vector<int64_t> labels(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = static_cast<int64_t>(rng() % 10);
    labels[static_cast<std::size_t>(i)] = k;
    uint8_t* img = pixels.data() + i * 28 * 28;
    for (int64_t p = 0; p < 28 * 28; ++p) img[p] = static_cast<uint8_t>(rng() % 64);
    for (int64_t r = 2 * k + 2; r < 2 * k + 5; ++r) {
      for (int64_t c = 4; c < 24; ++c) img[r * 28 + c] = 255;
    }
  }
  return std::make_shared<data::TensorDataset>(tensor<uint8_t>(pixels, {n, 28, 28}), tensor<int64_t>(labels, {n}));
}

TrainOptions small_run(Recipe recipe, int64_t epochs) {
  TrainOptions o;
  o.recipe = recipe;
  o.epochs = epochs;
  o.batch_size = 32;
  o.seed = 7;
  o.lr = recipe == Recipe::Reference ? 0.05 : 0.003;
  return o;
}

class TrainJob : public ::testing::TestWithParam<Device> {};

TEST_P(TrainJob, LossFallsAndTheNetworkLearnsTheBars) {
  TrainOptions o = small_run(Recipe::Reference, 4);
  o.device = GetParam();
  Trainer trainer(o, bars(320, 1), bars(200, 2));
  const std::vector<train::EpochReport> reports = trainer.run();
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_LT(reports.back().train_loss, 0.5 * reports.front().train_loss);
  EXPECT_GT(reports.back().test_accuracy, 0.8);
  EXPECT_EQ(reports.back().epoch, 4);
  EXPECT_GT(reports.back().images_per_second, 0);
  EXPECT_GT(reports.back().peak_memory_bytes, 0);
}

// Model state as host vectors, by name.
std::map<std::string, std::vector<double>> snapshot(const Trainer& t) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, tensor] : t.model_state()) out[name] = tensor.to(DType::F64).to_vector<double>();
  return out;
}

void expect_resume_equals_uninterrupted(Recipe recipe, Device device) {
  testing::TempDir dir;
  TrainOptions whole = small_run(recipe, 2);
  whole.device = device;
  Trainer uninterrupted(whole, bars(160, 3), bars(64, 4));
  const auto full_reports = uninterrupted.run();

  // The interrupted run stops after its first epoch's checkpoint.
  TrainOptions first = whole;
  first.checkpoint = dir.path() / "ckpt.safetensors";
  Trainer(first, bars(160, 3), bars(64, 4)).run_epoch();

  TrainOptions second = whole;
  second.checkpoint = first.checkpoint;
  second.resume = true;
  Trainer resumed(second, bars(160, 3), bars(64, 4));
  EXPECT_EQ(resumed.epochs_done(), 1);
  const auto resumed_reports = resumed.run();
  ASSERT_EQ(resumed_reports.size(), 1u);
  EXPECT_EQ(resumed_reports[0].epoch, 2);
  EXPECT_EQ(resumed_reports[0].train_loss, full_reports[1].train_loss);
  EXPECT_EQ(snapshot(resumed), snapshot(uninterrupted));
}

TEST_P(TrainJob, ResumeEqualsUninterruptedWithSgd) { expect_resume_equals_uninterrupted(Recipe::Reference, GetParam()); }

TEST_P(TrainJob, ResumeEqualsUninterruptedWithAdamScheduleAndAugmentation) {
  expect_resume_equals_uninterrupted(Recipe::Fast, GetParam());
}

// A run stopped after a random step (through request_stop, as strata-train's SIGINT and SIGTERM handlers do) and
// resumed from its checkpoint ends exactly where the uninterrupted run does.
void expect_stop_and_resume_equals_uninterrupted(Recipe recipe, Device device) {
  testing::TempDir dir;
  TrainOptions whole = small_run(recipe, 2);
  whole.device = device;
  Trainer uninterrupted(whole, bars(160, 3), bars(64, 4));
  const auto full_reports = uninterrupted.run();
  const int64_t steps = uninterrupted.steps_per_epoch();
  ASSERT_EQ(steps, 5);

  // Any step but the last: stopping inside the first epoch, at its end, or inside the second.
  std::random_device random;
  const int64_t stop_after = std::uniform_int_distribution<int64_t>(1, 2 * steps - 1)(random);
  SCOPED_TRACE(fmt::format("stopped after step {} of {}", stop_after, 2 * steps));
  TrainOptions first = whole;
  first.checkpoint = dir.path() / "ckpt.safetensors";
  {
    Trainer stopped(first, bars(160, 3), bars(64, 4));
    int64_t taken = 0;
    const auto reports = stopped.run([&](int64_t, int64_t) {
      if (++taken == stop_after) stopped.request_stop();
    });
    EXPECT_TRUE(stopped.stopped());
    EXPECT_EQ(stopped.epochs_done() * steps + stopped.steps_done(), stop_after);
    EXPECT_EQ(static_cast<int64_t>(reports.size()), stop_after / steps);
  }

  TrainOptions second = whole;
  second.checkpoint = first.checkpoint;
  second.resume = true;
  Trainer resumed(second, bars(160, 3), bars(64, 4));
  EXPECT_EQ(resumed.epochs_done() * steps + resumed.steps_done(), stop_after);
  const auto resumed_reports = resumed.run();
  EXPECT_FALSE(resumed.stopped());
  ASSERT_FALSE(resumed_reports.empty());
  EXPECT_EQ(resumed_reports.back().epoch, 2);
  // The epoch's loss is summed over its steps before and after the stop.
  EXPECT_EQ(resumed_reports.back().train_loss, full_reports.back().train_loss);
  EXPECT_EQ(resumed_reports.back().train_accuracy, full_reports.back().train_accuracy);
  EXPECT_EQ(snapshot(resumed), snapshot(uninterrupted));
}

TEST_P(TrainJob, StopInsideAnEpochAndResumeEqualsUninterruptedWithSgd) {
  expect_stop_and_resume_equals_uninterrupted(Recipe::Reference, GetParam());
}

TEST_P(TrainJob, StopInsideAnEpochAndResumeEqualsUninterruptedWithAdamScheduleAndAugmentation) {
  expect_stop_and_resume_equals_uninterrupted(Recipe::Fast, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, TrainJob, ::testing::ValuesIn(testing::available_devices()),
                         [](const auto& info) { return testing::device_test_name(info.param); });

// The message of the InvalidArgumentError that constructing a Trainer throws ("" when none).
std::string settings_error(const TrainOptions& o, int64_t train_images = 64) {
  try {
    Trainer(o, bars(train_images, 3), bars(32, 4));
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainJobCheckpoint, ResumeWithOtherSettingsIsRefusedListingEveryDifference) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "ckpt.safetensors";
  Trainer(o, bars(64, 3), bars(32, 4)).run();
  o.resume = true;
  EXPECT_EQ(settings_error(o), "");
  TrainOptions changed = o;
  changed.seed = 8;
  changed.epochs = 3;
  changed.lr = 0.02;
  changed.batch_size = 16;
  const std::string error = settings_error(changed, 48);
  for (const char* difference : {"seed 7 (this run: 8)", "epochs 1 (this run: 3)", "lr 0.05 (this run: 0.02)",
                                 "batch_size 32 (this run: 16)", "train_images 64 (this run: 48)"}) {
    EXPECT_NE(error.find(difference), std::string::npos) << difference << " missing from: " << error;
  }
  EXPECT_NE(error.find("pass --resume-with-changes"), std::string::npos) << error;
  // Accepted, the run continues with its own settings: two more epochs at the new rate.
  changed.accept_changes = true;
  {
    Trainer accepted(changed, bars(48, 3), bars(32, 4));
    EXPECT_EQ(accepted.epochs_done(), 1);
    EXPECT_EQ(accepted.run().size(), 2u);
  }
  // The recipe never changes: the optimizer state would not fit.
  changed.recipe = Recipe::Fast;
  EXPECT_NE(settings_error(changed, 48).find("cannot change recipe"), std::string::npos);
}

TEST(TrainJobCheckpoint, InsideAnEpochTheBatchSizeCannotChangeEvenWhenChangesAreAccepted) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "ckpt.safetensors";
  {
    Trainer t(o, bars(64, 3), bars(32, 4));
    t.request_stop();
    EXPECT_TRUE(t.run().empty());
    EXPECT_EQ(t.steps_done(), 0);  // asked before the first step: nothing to save
  }
  {
    o.resume = true;
    Trainer t(o, bars(64, 3), bars(32, 4));
    t.run([&](int64_t, int64_t) { t.request_stop(); });
    EXPECT_EQ(t.steps_done(), 1);
  }
  o.batch_size = 16;
  o.accept_changes = true;
  EXPECT_NE(settings_error(o).find("stopped inside an epoch, after step 1, which another batch size"),
            std::string::npos)
      << settings_error(o);
  o.batch_size = 32;
  o.epochs = 2;
  EXPECT_EQ(settings_error(o), "");
}

TEST(TrainJobCheckpoint, ASecondRunOnOneCheckpointIsRefusedNamingTheFirst) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "ckpt.safetensors";
  o.resume = true;
  {
    Trainer first(o, bars(64, 3), bars(32, 4));
    try {
      Trainer second(o, bars(64, 3), bars(32, 4));
      FAIL() << "two runs share one checkpoint";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("ckpt.safetensors.lock' is held by process {}", ::getpid())),
                std::string::npos)
          << e.what();
    }
    first.run();
  }
  EXPECT_EQ(Trainer(o, bars(64, 3), bars(32, 4)).epochs_done(), 1);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "ckpt.safetensors.lock"));
}

TEST(TrainJobCheckpoint, CorruptCheckpointIsAnIOErrorNamingTheFile) {
  testing::TempDir dir;
  const auto path = dir.path() / "ckpt.safetensors";
  testing::write_file(path, {1, 2, 3});
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = path;
  o.resume = true;
  try {
    Trainer(o, bars(64, 3), bars(32, 4));
    FAIL() << "a corrupt checkpoint was accepted";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt.safetensors"), std::string::npos) << e.what();
  }
}

TEST(TrainJobCheckpoint, ResumeWithoutACheckpointFileStartsFresh) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "none-yet.safetensors";
  o.resume = true;
  Trainer t(o, bars(64, 3), bars(32, 4));
  EXPECT_EQ(t.epochs_done(), 0);
  t.run();
  EXPECT_TRUE(std::filesystem::exists(*o.checkpoint));
}

// Rewrites the checkpoint at `path` through `edit`, as a damaged or hand-edited file would be.
template <typename Edit>
void tamper(const std::filesystem::path& path, Edit edit) {
  io::SafetensorsContent c = io::load_safetensors(path);
  edit(c);
  io::save_safetensors(path, c.tensors, c.metadata);
}

// The message of the IOError that resuming from `o.checkpoint` throws ("" when none).
std::string resume_error(TrainOptions o) {
  o.resume = true;
  try {
    Trainer(o, bars(64, 3), bars(32, 4));
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainJobCheckpoint, DamagedCheckpointsAreRefusedNamingWhatIsWrong) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "ckpt.safetensors";
  Trainer(o, bars(64, 3), bars(32, 4)).run();
  const io::SafetensorsContent good = io::load_safetensors(*o.checkpoint);
  const auto restore = [&] { io::save_safetensors(*o.checkpoint, good.tensors, good.metadata); };
  const auto set_meta = [&](const char* key, const char* value) {
    restore();
    tamper(*o.checkpoint, [&](io::SafetensorsContent& c) { c.metadata[key] = value; });
  };
  set_meta("format", "strata-train checkpoint 99");
  EXPECT_NE(resume_error(o).find("this strata-train reads \"strata-train checkpoint 2\""), std::string::npos);
  for (const char* done : {"-1", "3abc", "99999999999999999999", ""}) {
    set_meta("epochs_done", done);
    EXPECT_NE(resume_error(o).find(fmt::format("epochs_done is \"{}\", not a count", done)), std::string::npos) << done;
  }
  // Optimizer state: a parameter index too large for any number type, a learning rate that is not a number.
  restore();
  tamper(*o.checkpoint,
         [](io::SafetensorsContent& c) { c.tensors["optimizer.99999999999999999999.momentum_buffer"] = zeros({1}); });
  EXPECT_NE(resume_error(o).find("unexpected key '99999999999999999999.momentum_buffer'"), std::string::npos);
  restore();
  tamper(*o.checkpoint, [](io::SafetensorsContent& c) {
    c.tensors["optimizer.lr"] = full({}, std::numeric_limits<double>::quiet_NaN(), DType::F64);
  });
  EXPECT_NE(resume_error(o).find("'lr' must be a finite floating-point number >= 0"), std::string::npos);
  restore();
  EXPECT_EQ(resume_error(o), "");
}

TEST(TrainJobCheckpoint, AFileThatIsNotResumedIsNeverOverwritten) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "notes.txt";
  testing::write_file(*o.checkpoint, {'k', 'e', 'e', 'p'});
  try {
    Trainer(o, bars(64, 3), bars(32, 4));
    FAIL() << "an existing file would have been overwritten";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("exists; pass --resume"), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::read_file(*o.checkpoint), (testing::Bytes{'k', 'e', 'e', 'p'}));
}

TEST(TrainJobCheckpoint, APathThatCannotBeWrittenIsFoundBeforeTraining) {
  testing::TempDir dir;
  TrainOptions o = small_run(Recipe::Reference, 1);
  o.checkpoint = dir.path() / "missing" / "ckpt.safetensors";
  EXPECT_THROW(Trainer(o, bars(64, 3), bars(32, 4)), IOError);
  o.checkpoint = dir.path();
  try {
    Trainer(o, bars(64, 3), bars(32, 4));
    FAIL() << "a directory was taken for a checkpoint";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  o.checkpoint = std::filesystem::path();
  EXPECT_THROW(Trainer(o, bars(64, 3), bars(32, 4)), InvalidArgumentError);
  // The probe leaves nothing behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Note [The FLOP floor]: a network small enough to count by hand. Per example: the convolution (stride 2, pad 1) makes
// 2 x 2 x 2 = 8 outputs of 1 x 3 x 3 = 9 multiply-adds, 72; the first Linear 3 x 8 = 24; the second, inside a nested
// Sequential, 2 x 3 = 6. The convolution is the first layer with parameters, so its input gets no gradient: 2
// passes, the others 3, at 2 FLOPs per multiply-add.
TEST(TrainingFlops, CountsEachLayersMultiplyAddsForwardAndBackward) {
  nn::Sequential net;
  net.push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 2, 3).stride(2).padding(1)));
  net.push_back(std::make_shared<nn::ReLU>());
  net.push_back(std::make_shared<nn::Flatten>());
  net.push_back(std::make_shared<nn::Linear>(8, 3));
  auto tail = std::make_shared<nn::Sequential>();
  tail->push_back(std::make_shared<nn::ReLU>());
  tail->push_back(std::make_shared<nn::Linear>(3, 2));
  net.push_back(tail);
  EXPECT_EQ(train::training_flops_per_example(net, {1, 4, 4}), 2 * (72 * 2 + 24 * 3 + 6 * 3));
  // Layers without parameters in front change nothing: a Linear after them is still the first with parameters.
  nn::Sequential mlp;
  mlp.push_back(std::make_shared<nn::Flatten>());
  mlp.push_back(std::make_shared<nn::Linear>(6, 4));
  EXPECT_EQ(train::training_flops_per_example(mlp, {2, 3}), 2 * (24 * 2));
}

TEST(TrainingFlops, TheReferenceNetworkFromItsLayerSizes) {
  // conv1: 32 x 28 x 28 outputs of 1 x 9; conv2: 64 x 14 x 14 outputs of 32 x 9; then 3136 -> 128 -> 10.
  const int64_t conv1 = 32 * 28 * 28 * 9, conv2 = 64 * 14 * 14 * 32 * 9, fc1 = 3136 * 128, fc2 = 128 * 10;
  EXPECT_EQ(train::training_flops_per_example(*train::reference_network(kCPU), {1, 28, 28}),
            2 * (2 * conv1 + 3 * (conv2 + fc1 + fc2)));
  EXPECT_EQ(2 * (2 * conv1 + 3 * (conv2 + fc1 + fc2)), 24'995'328);
}

TEST(TrainJobOptions, CountsThatWouldOverflowAreRejected) {
  TrainOptions o = small_run(Recipe::Fast, std::numeric_limits<int64_t>::max());
  try {
    Trainer(o, bars(64, 3), bars(32, 4));
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("more steps than a 64-bit count holds"), std::string::npos) << e.what();
  }
  // One batch of everything: (n + b - 1) / b would overflow.
  o.epochs = 1;
  o.batch_size = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Trainer(o, bars(64, 3), bars(32, 4)).run().size(), 1u);
}

TEST(TrainJobOptions, BadOptionsAreRejected) {
  TrainOptions o = small_run(Recipe::Reference, 0);
  EXPECT_THROW(Trainer(o, bars(8, 1), bars(8, 1)), InvalidArgumentError);
  o.epochs = 1;
  o.batch_size = 0;
  EXPECT_THROW(Trainer(o, bars(8, 1), bars(8, 1)), InvalidArgumentError);
  o.batch_size = 4;
  o.resume = true;  // without a checkpoint
  EXPECT_THROW(Trainer(o, bars(8, 1), bars(8, 1)), InvalidArgumentError);
  o.resume = false;
  EXPECT_THROW(Trainer(o, nullptr, bars(8, 1)), InvalidArgumentError);
  EXPECT_THROW(Trainer(o, bars(8, 1), bars(0, 1)), InvalidArgumentError);
}

}  // namespace
}  // namespace strata
