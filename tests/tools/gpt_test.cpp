// The language-model task of strata-train (tools/train/gpt.h, shakespeare.h) on the excerpt in tests/data.
#include "gpt.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "shakespeare.h"
#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/runtime/parallel.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "test_files.h"
#include "test_fixtures.h"

namespace strata {
namespace {

using train::CharCorpus;
using train::Gpt;
using train::GptConfig;
using train::GptTrainer;
using train::GptTrainOptions;

std::shared_ptr<const CharCorpus> excerpt() {
  static const auto corpus = CharCorpus::load(STRATA_SHAKESPEARE_EXCERPT, /*pinned=*/false);
  return corpus;
}

GptConfig tiny_config(int64_t vocab) {
  return GptConfig{
      .block_size = 16, .vocab_size = vocab, .n_layer = 2, .n_head = 2, .n_embd = 32, .dropout = 0.0, .bias = false};
}

// A run of the cpu recipe made small: a few seconds on one core.
GptTrainOptions small_run(int64_t iters) {
  GptTrainOptions o;
  o.recipe.model.n_layer = 2;
  o.recipe.model.n_embd = 64;
  o.recipe.model.block_size = 32;
  o.recipe.iters = iters;
  o.recipe.warmup_iters = 5;
  o.recipe.eval_interval = 10;
  o.recipe.eval_iters = 2;
  o.seed = 7;
  return o;
}

TEST(GptModel, ParametersAreNanoGptsNamesCountAndInitialisation) {
  GptConfig config = train::gpt_recipe("cpu").model;
  config.vocab_size = 65;
  const Gpt model(config, kCPU);
  std::map<std::string, Tensor> params;
  for (const auto& [name, p] : model.named_parameters()) params[name] = p;
  for (const char* name :
       {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
        "transformer.h.3.attn.c_attn.weight", "transformer.h.3.mlp.c_proj.weight", "transformer.ln_f.weight"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_FALSE(params.contains("transformer.h.0.ln_1.bias")) << "bias=False has no biases";
  // nanoGPT's count (the position embedding left out) for 4 layers of width 128 and 65 characters: 0.80M.
  const int64_t C = 128;
  EXPECT_EQ(model.num_params(), 65 * C + 4 * (2 * C + 3 * C * C + C * C + 4 * C * C + 4 * C * C) + C);
  // N(0, 0.02), and the residual projections N(0, 0.02 / sqrt(2 n_layer)).
  const auto std_of = [](const Tensor& t) { return std::sqrt(var(t.to(DType::F64)).item<double>()); };
  EXPECT_NEAR(std_of(params.at("transformer.h.0.attn.c_attn.weight")), 0.02, 0.001);
  EXPECT_NEAR(std_of(params.at("transformer.h.0.mlp.c_proj.weight")), 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_EQ(sum(params.at("transformer.h.0.ln_1.weight")).item<double>(), C);
}

TEST(GptModel, TheOutputLayerIsTheTokenEmbedding) {
  Gpt model(tiny_config(11), kCPU);
  EXPECT_EQ(model.lm_head->weight.data<float>(), model.wte->weight.data<float>());
  int64_t count = 0;
  for (const Tensor& p : model.parameters()) count += p.data<float>() == model.wte->weight.data<float>();
  EXPECT_EQ(count, 1) << "a tied tensor is one parameter: one gradient, one optimizer state";
  const Tensor idx = tensor<int64_t>({1, 2, 3, 4}, {1, 4});
  Gpt::loss(model(idx), tensor<int64_t>({2, 3, 4, 5}, {1, 4})).backward();
  ASSERT_TRUE(model.wte->weight.grad().defined());
  // Rows never picked by the input still get a gradient: through the output layer.
  EXPECT_GT(sum(abs(model.wte->weight.grad().select(0, 9))).item<double>(), 0);
}

TEST(GptModel, APositionSeesNoLaterToken) {
  Gpt model(tiny_config(11), kCPU);
  NoGradGuard no_grad;
  const Tensor a = model(tensor<int64_t>({1, 2, 3, 4, 5, 6}, {1, 6}));
  const Tensor b = model(tensor<int64_t>({1, 2, 3, 9, 9, 9}, {1, 6}));
  const auto largest_difference = [&](int64_t from, int64_t length) {
    return max(abs(sub(a.narrow(1, from, length), b.narrow(1, from, length)))).item<double>();
  };
  EXPECT_EQ(largest_difference(0, 3), 0);
  EXPECT_GT(largest_difference(3, 1), 1e-4);
}

TEST(GptModel, RefusesWhatItCannotRun) {
  Gpt model(tiny_config(11), kCPU);
  EXPECT_THROW(model(zeros({1, 17}, DType::I64)), InvalidArgumentError);  // longer than the block
  EXPECT_THROW(model(zeros({1, 4}, DType::F32)), InvalidArgumentError);
  GptConfig odd = tiny_config(11);
  odd.n_head = 3;
  EXPECT_THROW(Gpt(odd, kCPU), InvalidArgumentError);
  Generator g(1);
  EXPECT_THROW(model.generate(zeros({1, 1}, DType::I64), 2, 0.0, std::nullopt, g), InvalidArgumentError);
}

TEST(GptModel, GenerateSamplesTheRightShapeRepeatablyAndTopOneIsGreedy) {
  Gpt model(tiny_config(11), kCPU);
  const Tensor start = zeros({2, 1}, DType::I64);
  Generator g1(5), g2(5);
  const Tensor a = model.generate(start, 20, 1.0, 3, g1);  // longer than the block: the context is cropped
  const Tensor b = model.generate(start, 20, 1.0, 3, g2);
  EXPECT_EQ(a.shape(), (Shape{2, 21}));
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  EXPECT_GE(min(a).item<int64_t>(), 0);
  EXPECT_LT(max(a).item<int64_t>(), 11);
  Generator g3(1);
  const Tensor greedy = model.generate(start.narrow(0, 0, 1), 1, 1.0, 1, g3);
  NoGradGuard no_grad;
  model.eval();
  EXPECT_EQ(greedy.select(1, 1).item<int64_t>(), argmax(model(start.narrow(0, 0, 1)).select(1, 0), 1).item<int64_t>());
}

TEST(CharCorpus, VocabularySplitAndEncoding) {
  const CharCorpus corpus(std::string(90, 'b') + std::string(10, 'a') + "c");
  EXPECT_EQ(corpus.vocab_size(), 3);
  EXPECT_EQ(corpus.train().size(), 90u);  // nanoGPT's int(n * 0.9) of 101
  EXPECT_EQ(corpus.val().size(), 11u);
  EXPECT_EQ(corpus.train().front(), 1);  // sorted: a 0, b 1, c 2
  EXPECT_EQ(corpus.encode("cab"), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(corpus.decode({2, 0, 1}), "cab");
  EXPECT_THROW((void)corpus.encode("d"), InvalidArgumentError);
  EXPECT_THROW((void)corpus.decode({3}), InvalidArgumentError);
  EXPECT_THROW(CharCorpus("too short"), IOError);
}

TEST(CharCorpus, AMissingOrAlteredCorpusNamesTheFileAndTheFix) {
  testing::TempDir dir;
  try {
    (void)CharCorpus::load(dir / "none.txt", /*pinned=*/true);
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("none.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scripts/fetch-shakespeare"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "corpus.txt") << std::string(500, 'x');
  try {
    (void)CharCorpus::load(dir / "corpus.txt", /*pinned=*/true);
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated or altered"), std::string::npos) << e.what();
  }
  EXPECT_EQ(CharCorpus::load(dir / "corpus.txt", /*pinned=*/false)->vocab_size(), 1);
}

TEST(GptTrainer, TheScheduleIsNanoGpts) {
  const GptTrainer trainer(GptTrainOptions{}, excerpt());
  EXPECT_DOUBLE_EQ(trainer.lr_at(0), 1e-3 / 101);
  EXPECT_DOUBLE_EQ(trainer.lr_at(99), 1e-3 * 100 / 101);
  EXPECT_DOUBLE_EQ(trainer.lr_at(100), 1e-3);
  EXPECT_NEAR(trainer.lr_at(1050), 1e-4 + 0.5 * (1e-3 - 1e-4), 1e-12);
  EXPECT_NEAR(trainer.lr_at(2000), 1e-4, 1e-12);
  for (int64_t i = 100; i < 2000; i += 50) EXPECT_GT(trainer.lr_at(i), trainer.lr_at(i + 50));
}

TEST(GptTrainer, BatchesAreAFunctionOfTheStepInsideTheSplit) {
  std::set<int64_t> starts;
  for (int64_t row = 0; row < 64; ++row) {
    const int64_t s = GptTrainer::batch_offset(1, 0, 3, row, 1000, 64);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 1000 - 64);
    EXPECT_EQ(s, GptTrainer::batch_offset(1, 0, 3, row, 1000, 64));
    starts.insert(s);
  }
  EXPECT_GT(starts.size(), 55u) << "rows start at unrelated places";
  EXPECT_NE(GptTrainer::batch_offset(1, 0, 3, 0, 1000, 64), GptTrainer::batch_offset(1, 0, 4, 0, 1000, 64));
  EXPECT_NE(GptTrainer::batch_offset(1, 0, 3, 0, 1000, 64), GptTrainer::batch_offset(1, 1, 3, 0, 1000, 64));
}

TEST(GptTrainer, TheLossFallsAndTheEvaluationsFollowTheInterval) {
  GptTrainer trainer(small_run(30), excerpt());
  const auto reports = trainer.run();
  ASSERT_EQ(reports.size(), 4u);  // at 0, 10, 20 and 30
  EXPECT_EQ(reports[0].iter, 0);
  EXPECT_EQ(reports[3].iter, 30);
  EXPECT_NEAR(reports[0].val_loss, std::log(static_cast<double>(excerpt()->vocab_size())), 0.3);
  EXPECT_LT(reports[3].val_loss, reports[0].val_loss - 0.5);
  EXPECT_GT(reports[3].tokens_per_second, 0);
  EXPECT_EQ(trainer.iters_done(), 30);
  const std::string text = trainer.sample(40, 0.8, 10, 1);
  EXPECT_EQ(text.size(), 40u);
  EXPECT_EQ(text, trainer.sample(40, 0.8, 10, 1));
}

std::map<std::string, std::vector<float>> snapshot(Gpt& model) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : model.state_dict()) out[name] = t.to(DType::F32).to_vector<float>();
  return out;
}

// A run stopped at any step (as SIGTERM does) and resumed ends bit for bit where the uninterrupted run does.
TEST(GptTrainer, StopAndResumeEqualsUninterrupted) {
  testing::TempDir dir;
  GptTrainOptions whole = small_run(20);
  whole.recipe.model.dropout = 0.1;  // the generator's position is part of the checkpoint too
  GptTrainer uninterrupted(whole, excerpt());
  const auto full = uninterrupted.run();
  for (const int64_t stop_after : {7, 10}) {  // inside an interval, and at an evaluation
    SCOPED_TRACE(stop_after);
    GptTrainOptions first = whole;
    first.checkpoint = dir / fmt::format("ckpt{}.safetensors", stop_after);
    {
      GptTrainer stopped(first, excerpt());
      (void)stopped.run([&](int64_t iter, int64_t) {
        if (iter == stop_after) stopped.request_stop();
      });
      EXPECT_TRUE(stopped.stopped());
      EXPECT_EQ(stopped.iters_done(), stop_after);
    }
    GptTrainOptions second = first;
    second.resume = true;
    GptTrainer resumed(second, excerpt());
    EXPECT_EQ(resumed.iters_done(), stop_after);
    const auto rest = resumed.run();
    EXPECT_EQ(rest.back().val_loss, full.back().val_loss);
    EXPECT_EQ(snapshot(resumed.model()), snapshot(uninterrupted.model()));
  }
}

// Note [Fewer threads while other processes hold the cores]: a step of the cpu recipe's model gives the same bits
// on one thread as on the whole pool, so a run on a busy machine (a resumed one, say) ends where one on an idle
// machine does. The budget is pinned here instead of loading the machine.
TEST(GptTrainer, TheThreadBudgetLeavesTrainingBitForBit) {
  const testing::PoolSize pool(std::max(num_threads(), 4));
  for (const std::optional<DType> amp : {std::optional<DType>{}, std::optional<DType>{DType::BF16}}) {
    SCOPED_TRACE(amp ? dtype_name(*amp) : "f32");
    std::map<std::string, std::vector<float>> trained[2];
    double losses[2] = {0, 0};
    for (const int budget : {num_threads(), 1}) {
      detail::pin_thread_budget(budget);
      GptTrainOptions o;
      o.recipe.iters = 3;
      o.recipe.eval_interval = 3;
      o.recipe.eval_iters = 1;
      o.recipe.model.dropout = 0.1;
      o.seed = 3;
      o.amp = amp;
      GptTrainer trainer(o, excerpt());
      const int slot = budget == 1 ? 1 : 0;
      losses[slot] = trainer.run().back().val_loss;
      trained[slot] = snapshot(trainer.model());
    }
    EXPECT_EQ(losses[0], losses[1]);
    for (const auto& [name, values] : trained[0]) {
      EXPECT_EQ(values, trained[1][name]) << name << ": one thread's step differs from " << num_threads() << "'s";
    }
  }
}

TEST(GptTrainer, ResumeRefusesAnotherModelAndListsOtherSettings) {
  testing::TempDir dir;
  GptTrainOptions o = small_run(10);
  o.checkpoint = dir / "ckpt.safetensors";
  (void)GptTrainer(o, excerpt()).run();
  GptTrainOptions other = o;
  other.resume = true;
  other.recipe.lr = 2e-3;
  other.seed = 8;
  try {
    GptTrainer t(other, excerpt());
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("lr 0.001 (this run: 0.002)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("seed 7 (this run: 8)"), std::string::npos) << e.what();
  }
  other.accept_changes = true;
  EXPECT_NO_THROW(GptTrainer(other, excerpt()));
  other.recipe.model.n_embd = 32;
  try {
    GptTrainer t(other, excerpt());
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot change model"), std::string::npos) << e.what();
  }
}

TEST(GptTrainer, MixedPrecisionTrainsLikeF32) {
  GptTrainer f32(small_run(20), excerpt());
  const double f32_loss = f32.run().back().val_loss;
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dtype));
    GptTrainOptions o = small_run(20);
    o.amp = dtype;
    GptTrainer low(o, excerpt());
    const auto reports = low.run();
    EXPECT_LT(reports.back().val_loss, reports.front().val_loss - 0.5);
    EXPECT_NEAR(reports.back().val_loss, f32_loss, 0.05);
  }
}

}  // namespace
}  // namespace strata
