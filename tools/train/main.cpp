// strata-train: trains the reference network on Fashion-MNIST (tools/train/trainer.h) and reports every epoch.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "progress.h"
#include "shakespeare.h"
#include "strata/core/error.h"
#include "strata/data/fashion_mnist.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/profiler.h"
#include "tools/tool_output.h"
#include "trainer.h"
#include "training_log.h"

namespace {

using namespace strata;

// The first `limit` examples of a split (all when limit <= 0), as a dataset.
std::shared_ptr<data::TensorDataset> subset(const data::FashionMnist& set, int64_t limit) {
  const int64_t n = limit > 0 ? std::min(limit, set.size()) : set.size();
  return std::make_shared<data::TensorDataset>(set.images().narrow(0, 0, n), set.labels().narrow(0, 0, n));
}

// Option checks that say what is wanted: CLI11's PositiveNumber prints its range as 300-digit numbers, lets NaN
// through, and CLI11 itself wraps "-1" into an unsigned option or clamps a number too large for it.
template <typename T>
CLI::Validator number_check(T min, const char* wanted) {
  return CLI::Validator(
      [min, wanted](std::string& text) -> std::string {
        T value{};
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range) return fmt::format("'{}' is out of range: want {}", text, wanted);
        if (ec != std::errc() || end != text.data() + text.size() || !(value >= min) ||
            (std::is_floating_point_v<T> && !std::isfinite(static_cast<double>(value)))) {
          return fmt::format("want {}, got '{}'", wanted, text);
        }
        return "";
      },
      wanted);
}

// Note [A clean stop on SIGINT and SIGTERM]
// Clusters preempt with SIGTERM and people press Ctrl-C; either would otherwise lose the epoch under way. The first
// of them asks the trainer to stop after the step under way (Trainer::request_stop, an atomic store): it writes a
// checkpoint that resumes exactly from that step, and the tool prints where it stopped and how to resume, then
// exits 128 + the signal's number (130, 143), as a shell reports a process killed by it. A second signal ends the
// process at once, by that signal.
// No asynchronous handler takes them. They are blocked first thing in main, before any thread exists (threads
// inherit the mask), and one thread of ours waits for them with sigwait. A handler runs on the stack of whichever
// thread the signal interrupts, and under load about one run in twenty died after SIGTERM with a corrupted heap
// ("double free or corruption", SIGSEGV): AddressSanitizer caught the handler writing its locals inside a heap
// block, so the interrupted thread's stack pointer was not on a stack (inside a math library's kernel, we
// believe; no frame says which). With sigwait no other thread is interrupted, and none of their system calls
// fails with EINTR either.
std::mutex g_stop_mutex;               // guards the two below
std::function<void()> g_request_stop;  // stops the run under way, while it exists
int g_signal = 0;                      // the first signal taken, 0 before one

void start_stop_signal_thread() {
  // Their default actions, whatever was inherited: a shell starts a background job with SIGINT ignored, and the
  // second signal must end the process.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGINT, &default_action, nullptr);
  sigaction(SIGTERM, &default_action, nullptr);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals] {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) return;
    {
      std::lock_guard lock(g_stop_mutex);
      g_signal = signal;
      if (g_request_stop) g_request_stop();
    }
    if (sigwait(&signals, &signal) != 0) return;
    // The second: its default action, which ends the process, now that this thread lets it through.
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    raise(signal);
  }).detach();
}

// Makes `trainer` the run a signal stops, for its lifetime; a signal taken before it existed stops it at once.
class StopTarget {
 public:
  template <typename Trainer>
  explicit StopTarget(Trainer& trainer) {
    std::lock_guard lock(g_stop_mutex);
    g_request_stop = [&trainer] { trainer.request_stop(); };
    if (g_signal != 0) trainer.request_stop();
  }
  ~StopTarget() {
    std::lock_guard lock(g_stop_mutex);
    g_request_stop = nullptr;
  }
  StopTarget(const StopTarget&) = delete;
  StopTarget& operator=(const StopTarget&) = delete;

  static int signal() {
    std::lock_guard lock(g_stop_mutex);
    return g_signal;
  }
};

// The command line again, as a shell would read it, with --resume added when it was not there.
std::string resume_command(int argc, char** argv) {
  std::string out;
  bool resume = false;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    resume = resume || arg == "--resume" || arg == "--resume-with-changes";
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_=./:,+@%") == std::string_view::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += arg;
    } else {
      out += '\'';
      for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return resume ? out : out + " --resume";
}

nlohmann::json to_json(const train::EpochReport& r) {
  return {{"epoch", r.epoch},
          {"train_loss", r.train_loss},
          {"train_accuracy", r.train_accuracy},
          {"test_accuracy", r.test_accuracy},
          {"seconds", r.seconds},
          {"images_per_second", r.images_per_second},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"synchronizations", r.synchronizations},
          {"host_to_device_copies", r.host_to_device_copies},
          {"device_to_host_copies", r.device_to_host_copies},
          {"device_to_device_copies", r.device_to_device_copies}};
}

// Seconds on the steady clock: the progress bar's time.
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Writes a progress bar's frame, when there is one, at once.
void show(const std::string& frame) {
  if (frame.empty()) return;
  std::fputs(frame.c_str(), stdout);
  std::fflush(stdout);
}

// Says where a stopped run stopped and how to resume it (rank 0), and returns the exit status: 128 + the signal's
// number, as a shell reports a process killed by it.
int report_stop(bool speaks, bool saved, const std::string& checkpoint, const std::string& where, int argc,
                char** argv) {
  std::fflush(stdout);
  const int signal = StopTarget::signal();
  const std::string name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a stop request";
  if (speaks && saved) {  // rank 0 says where the world stopped
    fmt::print(stderr, "strata-train: stopped by {} {}; saved in {}; resume with: {}\n", name, where, checkpoint,
               resume_command(argc, argv));
  } else if (speaks) {
    fmt::print(stderr, "strata-train: stopped by {} {}; without --checkpoint nothing was saved\n", name, where);
  }
  return 128 + (signal != 0 ? signal : SIGTERM);
}

// Refuses an unwritable profile path before any work (Note [The profiler]); true when this rank records one.
bool check_profile(const std::string& profile, bool speaks) {
  if (profile.empty() || !speaks) return false;
  STRATA_CHECK(!profiler::is_enabled(), InvalidArgumentError,
               "--profile {}: STRATA_PROFILE already records this run; use one of the two", profile);
  profiler::check_writable(profile);
  return true;
}

void write_profile(const std::string& profile) {
  const profiler::Result result = profiler::stop();
  result.export_chrome_trace(profile);
  fmt::print(stderr, "strata-train: profile of {} events written to {}\n{}", result.events().size(), profile,
             result.table("cpu_time_total", 10));
}

// The shakespeare task's own options, unset where the recipe decides.
struct ShakespeareArgs {
  std::string recipe = "cpu";
  std::string data;  // empty: the fetched corpus
  std::optional<int64_t> iters, eval_interval, eval_iters, batch_size;
  std::optional<double> lr;
  int64_t sample = 0;
  double temperature = 0.8;
  int64_t top_k = 200;  // nanoGPT's sample.py
  std::string amp;
};

int run_shakespeare(const ShakespeareArgs& args, const train::TrainOptions& common, const std::string& device,
                    const std::string& checkpoint, const std::string& logdir, const std::string& profile, bool json,
                    int argc, char** argv) {
  try {
    dist::ProcessGroup& world = dist::init();
    const bool speaks = world.rank() == 0;
    train::GptTrainOptions options;
    options.recipe = train::gpt_recipe(args.recipe);
    if (args.iters) options.recipe.iters = *args.iters;
    if (args.eval_interval) options.recipe.eval_interval = *args.eval_interval;
    if (args.eval_iters) options.recipe.eval_iters = *args.eval_iters;
    if (args.batch_size) options.recipe.batch_size = *args.batch_size;
    if (args.lr) options.recipe.lr = *args.lr;
    options.seed = common.seed;
    options.group = &world;
    options.device = device == "best" ? dist::local_device() : Device(device);
    if (!args.amp.empty()) options.amp = args.amp == "bf16" ? DType::BF16 : DType::F16;
    options.checkpoint = common.checkpoint;
    options.resume = common.resume;
    options.accept_changes = common.accept_changes;
    std::optional<train::TrainingLog> log;
    if (!logdir.empty() && speaks) log.emplace(logdir, options.device);
    options.record_steps = log.has_value();
    const bool profiling = check_profile(profile, speaks);

    const bool pinned = args.data.empty();
    const auto corpus =
        train::CharCorpus::load(pinned ? train::default_shakespeare_path() : std::filesystem::path(args.data), pinned);
    train::GptTrainer trainer(options, corpus);
    const StopTarget stop_target(trainer);
    const train::GptRecipe& r = trainer.options().recipe;
    const tools::ProgressStyle style =
        speaks && !json
            ? tools::progress_style(isatty(STDOUT_FILENO) != 0, tools::launched_by_mpi() || world.size() > 1)
            : tools::ProgressStyle::None;
    if (speaks && !json) {
      fmt::print(
          "strata-train: shakespeare {} recipe on {}: GPT of {} layers, {} heads, width {}, context {} "
          "({:.2f}M parameters), {} characters of {}, batch {}, {} iterations{}\n",
          r.name, options.device, r.model.n_layer, r.model.n_head, r.model.n_embd, r.model.block_size,
          static_cast<double>(trainer.model().num_params()) / 1e6, corpus->vocab_size(), corpus->name(), r.batch_size,
          r.iters, options.amp ? fmt::format(", autocast {}", args.amp) : "");
      if (world.size() > 1) {
        fmt::print("{} ranks ({}), batch {} per rank: {} tokens per step\n", world.size(), world.backend_name(),
                   r.batch_size, trainer.tokens_per_step());
      }
      if (trainer.iters_done() > 0) fmt::print("resumed from {} at iteration {}\n", checkpoint, trainer.iters_done());
      std::fflush(stdout);
    }
    std::unique_ptr<tools::ProgressBar> bar;
    auto on_step = [&](int64_t iter, int64_t) {
      if (style == tools::ProgressStyle::None) return;
      // One bar per interval between two evaluations, counting its iterations.
      const int64_t interval = (iter - 1) / r.eval_interval;
      const int64_t intervals = (r.iters + r.eval_interval - 1) / r.eval_interval;
      if (!bar || bar->epoch() != interval + 1) {
        bar = std::make_unique<tools::ProgressBar>(style, interval + 1, intervals, trainer.tokens_per_step(),
                                                   iter - interval * r.eval_interval, steady_seconds(), "tok", "eval");
      }
      const int64_t in_interval = std::min(r.eval_interval, r.iters - interval * r.eval_interval);
      show(bar->frame(iter - interval * r.eval_interval, in_interval, steady_seconds()));
    };
    auto on_eval = [&](const train::GptReport& e) {
      if (log) log->evaluation(e);
      if (json || !speaks) return;
      if (e.iter == e.first_step) {
        fmt::print("iter {}/{}  train loss {:.4f}  val loss {:.4f}\n", e.iter, r.iters, e.train_loss, e.val_loss);
      } else {
        fmt::print(
            "iter {}/{}  train loss {:.4f}  val loss {:.4f}  step loss {:.4f}  lr {:.2e}  {:.1f} s  "
            "{:.0f} tok/s  peak memory {:.1f} MiB\n",
            e.iter, r.iters, e.train_loss, e.val_loss, e.step_loss, e.lr, e.seconds, e.tokens_per_second,
            static_cast<double>(e.peak_memory_bytes) / (1 << 20));
      }
      std::fflush(stdout);
    };
    if (profiling) profiler::start();
    const std::vector<train::GptReport> reports = trainer.run(on_step, on_eval);
    if (profiling) write_profile(profile);
    if (trainer.stopped()) {
      if (bar) std::fputs(bar->clear().c_str(), stdout);
      return report_stop(speaks, options.checkpoint.has_value(), checkpoint,
                         fmt::format("at iteration {}/{}", trainer.iters_done(), r.iters), argc, argv);
    }
    std::string sample;
    if (args.sample > 0 && speaks) {
      sample = trainer.sample(args.sample, args.temperature,
                              args.top_k > 0 ? std::optional<int64_t>(args.top_k) : std::nullopt, common.seed);
    }
    const auto [train_loss, val_loss] =
        reports.empty() ? trainer.evaluate() : std::pair{reports.back().train_loss, reports.back().val_loss};
    if (speaks && json) {
      nlohmann::json out{{"task", "shakespeare"},
                         {"device", fmt::format("{}", options.device)},
                         {"ranks", world.size()},
                         {"recipe", r.name},
                         {"iters", r.iters},
                         {"batch_size", r.batch_size},
                         {"block_size", r.model.block_size},
                         {"seed", options.seed},
                         {"amp", args.amp.empty() ? "off" : args.amp},
                         {"parameters", trainer.model().num_params()},
                         {"final_train_loss", train_loss},
                         {"final_val_loss", val_loss},
                         {"evaluations", nlohmann::json::array()}};
      for (const auto& e : reports) {
        out["evaluations"].push_back(
            {{"iteration", e.iter},
             {"train_loss", e.train_loss},
             {"val_loss", e.val_loss},
             {"step_loss", std::isnan(e.step_loss) ? nlohmann::json() : nlohmann::json(e.step_loss)},
             {"lr", e.lr},
             {"seconds", e.seconds},
             {"tokens_per_second", e.tokens_per_second},
             {"peak_memory_bytes", e.peak_memory_bytes},
             {"synchronizations", e.synchronizations}});
      }
      if (args.sample > 0) out["sample"] = sample;
      fmt::print("{}\n", out.dump(2));
    } else if (speaks) {
      fmt::print("final val loss: {:.4f}\n", val_loss);
      if (args.sample > 0)
        fmt::print("sample ({} characters, temperature {}, top-k {}):\n{}\n", args.sample, args.temperature, args.top_k,
                   sample);
    }
  } catch (const Error& e) {
    std::string_view what = e.what();
    if (what.starts_with("strata-train: ")) what.remove_prefix(std::string_view("strata-train: ").size());
    fmt::print(stderr, "strata-train: error: {}\n", what);
    return 1;
  }
  return tools::stdout_written("strata-train") ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  start_stop_signal_thread();  // before any other thread starts (Note [A clean stop on SIGINT and SIGTERM])
  CLI::App app{
      "strata-train: trains the reference CNN on Fashion-MNIST (--task fashion-mnist, the default) or a "
      "character-level GPT on Shakespeare (--task shakespeare)"};
  train::TrainOptions options;
  std::string task = "fashion-mnist";
  std::string device = "best";
  std::string recipe;
  std::string data_dir;
  std::string checkpoint;
  std::string logdir;
  std::string profile;
  double lr = 0;
  int64_t train_images = 0, test_images = 0;
  bool json = false;
  ShakespeareArgs gpt;
  const auto positive = number_check<int64_t>(1, "a positive integer");
  const auto count = number_check<int64_t>(0, "an integer >= 0");
  app.add_option("--task", task, "fashion-mnist: the reference CNN; shakespeare: nanoGPT's character-level GPT")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion-mnist", "shakespeare"}));
  app.add_option("--epochs", options.epochs, "epochs to train (fashion-mnist)")->capture_default_str()->check(positive);
  app.add_option("--batch-size", options.batch_size,
                 "images per step (fashion-mnist, default 64), or sequences per step (shakespeare, default the "
                 "recipe's)")
      ->check(positive);
  app.add_option("--lr", lr,
                 "learning rate (default: the recipe's, 0.01 reference / 0.002 fast / 0.001 for shakespeare's)")
      ->check(number_check<double>(std::numeric_limits<double>::denorm_min(), "a positive number"));
  app.add_option("--seed", options.seed, "seed of initialisation, shuffling, batches and augmentation")
      ->capture_default_str()
      ->check(number_check<uint64_t>(0, "an integer from 0 to 2^64-1"));
  app.add_option("--device", device, "cpu, cuda, cuda:N, or best (a GPU when there is one)")->capture_default_str();
  app.add_option("--recipe", recipe,
                 "fashion-mnist: reference (SGD lr 0.01 momentum 0.9, the default) or fast (Adam, cosine schedule, "
                 "horizontal flips); shakespeare: cpu (4 layers, width 128, context 64, 2000 iterations, the "
                 "default) or gpu (6 layers, width 384, context 256, 5000 iterations, dropout 0.2)")
      ->check(CLI::IsMember({"reference", "fast", "cpu", "gpu"}));
  app.add_option("--data", data_dir,
                 fmt::format("fashion-mnist: the directory with the IDX files (default {}); shakespeare: a text "
                             "file (default {}, which scripts/fetch-shakespeare writes)",
                             data::kFashionMnistDir, train::default_shakespeare_path().string()));
  app.add_option("--checkpoint", checkpoint,
                 "safetensors file written after every epoch (or evaluation) and when SIGINT or SIGTERM stops the run "
                 "(exit 130 or 143); FILE.lock keeps a second run off it");
  app.add_flag("--resume", options.resume,
               "continue from --checkpoint when it exists; its settings (epochs, lr, batch size, seed, recipe, "
               "image counts) must be this run's");
  app.add_flag("--resume-with-changes", options.accept_changes,
               "like --resume, but continue with this run's settings where they differ from the checkpoint's: the "
               "result then matches no uninterrupted run (the recipe, and inside an epoch the batch size and "
               "training images, still cannot change)");
  app.add_option("--train-images", train_images, "train on the first N images only (0: all; fashion-mnist)")
      ->check(count);
  app.add_option("--test-images", test_images, "test on the first N images only (0: all; fashion-mnist)")->check(count);
  app.add_option("--iters", gpt.iters, "training iterations (shakespeare; default the recipe's)")->check(positive);
  app.add_option("--eval-interval", gpt.eval_interval,
                 "iterations between evaluations and checkpoints (shakespeare; default 250)")
      ->check(positive);
  app.add_option("--eval-iters", gpt.eval_iters,
                 "batches per split an evaluation averages (shakespeare; default the recipe's, 20 cpu / 200 gpu)")
      ->check(positive);
  app.add_option("--sample", gpt.sample, "after training, print N characters generated by the model (shakespeare)")
      ->check(count);
  app.add_option("--temperature", gpt.temperature, "sampling temperature (shakespeare)")
      ->capture_default_str()
      ->check(number_check<double>(std::numeric_limits<double>::denorm_min(), "a positive number"));
  app.add_option("--top-k", gpt.top_k, "sample from the K most likely characters only (shakespeare; 0: all)")
      ->capture_default_str()
      ->check(count);
  app.add_option("--amp", gpt.amp,
                 "mixed precision: products and attention in bf16 or f16 under autocast, f16 with loss scaling "
                 "(shakespeare)")
      ->check(CLI::IsMember({"bf16", "f16"}));
  app.add_option("--logdir", logdir,
                 "write TensorBoard event files into DIR: each step's loss and learning rate, each epoch's (or "
                 "evaluation's) figures, peak memory, copies and synchronisations (view with: tensorboard --logdir "
                 "DIR)");
  app.add_option("--profile", profile,
                 "record the training's ops, copies, synchronisations and allocator events and write them to FILE "
                 "as a Chrome trace (open in Perfetto or chrome://tracing); the top ops by time go to stderr");
  app.add_flag("--json", json, "print one JSON document instead of lines");
  CLI11_PARSE(app, argc, argv);
  options.resume = options.resume || options.accept_changes;
  // Each task's own options are refused with the other, rather than silently ignored.
  const bool shakespeare = task == "shakespeare";
  for (const char* name : shakespeare ? std::vector<const char*>{"--epochs", "--train-images", "--test-images"}
                                      : std::vector<const char*>{"--iters", "--eval-interval", "--eval-iters",
                                                                 "--sample", "--temperature", "--top-k", "--amp"}) {
    if (app.count(name) > 0) {
      fmt::print(stderr, "strata-train: error: {} is not an option of --task {}\n", name, task);
      return 1;
    }
  }
  if (recipe.empty()) recipe = shakespeare ? "cpu" : "reference";
  if (shakespeare != (recipe == "cpu" || recipe == "gpu")) {
    fmt::print(stderr, "strata-train: error: --recipe {} is not a recipe of --task {} (its recipes: {})\n", recipe,
               task, shakespeare ? "cpu, gpu" : "reference, fast");
    return 1;
  }
  if (app.count("--checkpoint") > 0) options.checkpoint = checkpoint;
  if (shakespeare) {
    gpt.recipe = recipe;
    if (app.count("--batch-size") > 0) gpt.batch_size = options.batch_size;
    if (app.count("--lr") > 0) gpt.lr = lr;
    gpt.data = data_dir;
    return run_shakespeare(gpt, options, device, checkpoint, app.count("--logdir") > 0 ? logdir : "",
                           app.count("--profile") > 0 ? profile : "", json, argc, argv);
  }
  if (data_dir.empty()) data_dir = std::string(data::kFashionMnistDir);

  try {
    // Under mpirun the world is every rank (Note [Training on several ranks]); "best" is then this rank's GPU.
    dist::ProcessGroup& world = dist::init();
    options.group = &world;
    const bool speaks = world.rank() == 0;  // rank 0 alone prints
    options.device = device == "best" ? dist::local_device() : Device(device);
    options.recipe = recipe == "fast" ? train::Recipe::Fast : train::Recipe::Reference;
    if (app.count("--lr") > 0) options.lr = lr;
    // Opened before the data is read, so that a directory that cannot be written is refused before any work.
    std::optional<train::TrainingLog> log;  // rank 0 writes (Note [What --logdir writes])
    if (app.count("--logdir") > 0 && speaks) log.emplace(logdir, options.device);
    options.record_steps = log.has_value();
    // Likewise the profile: an unwritable FILE is refused now, not after the run (Note [The profiler]).
    const bool profiling = check_profile(app.count("--profile") > 0 ? profile : "", speaks);

    const data::FashionMnist train_split(data_dir, data::Split::Train);
    const data::FashionMnist test_split(data_dir, data::Split::Test);
    train::Trainer trainer(options, subset(train_split, train_images), subset(test_split, test_images));
    const StopTarget stop_target(trainer);
    // Note [Progress under an MPI launcher]
    const tools::ProgressStyle style =
        speaks && !json
            ? tools::progress_style(isatty(STDOUT_FILENO) != 0, tools::launched_by_mpi() || world.size() > 1)
            : tools::ProgressStyle::None;
    if (speaks && !json) {
      fmt::print("strata-train: {} recipe on {}, {} training and {} test images, batch {}, {} epochs\n", recipe,
                 options.device, std::min(train_images > 0 ? train_images : train_split.size(), train_split.size()),
                 std::min(test_images > 0 ? test_images : test_split.size(), test_split.size()), options.batch_size,
                 options.epochs);
      if (world.size() > 1) {
        fmt::print("{} ranks ({}), batch {} per rank: {} images per step\n", world.size(), world.backend_name(),
                   options.batch_size, options.batch_size * world.size());
      }
      if (trainer.steps_done() > 0) {
        fmt::print("resumed from {} at step {}/{} of epoch {}\n", checkpoint, trainer.steps_done(),
                   trainer.steps_per_epoch(), trainer.epochs_done() + 1);
      } else if (trainer.epochs_done() > 0) {
        fmt::print("resumed from {} after epoch {}\n", checkpoint, trainer.epochs_done());
      }
      std::fflush(stdout);
    }

    std::unique_ptr<tools::ProgressBar> bar;
    auto on_step = [&](int64_t step, int64_t steps) {
      if (style == tools::ProgressStyle::None) return;
      // A new bar at an epoch's first step reported: 1, or where a resumed epoch goes on.
      if (!bar || bar->epoch() != trainer.epochs_done() + 1) {
        // Images per step of the world, as the epoch's line counts them.
        bar = std::make_unique<tools::ProgressBar>(style, trainer.epochs_done() + 1, options.epochs,
                                                   options.batch_size * world.size(), step, steady_seconds());
      }
      show(bar->frame(step, steps, steady_seconds()));
    };
    auto on_epoch = [&](const train::EpochReport& r) {
      if (log) log->epoch(r, trainer.steps_per_epoch());
      if (json || !speaks) return;
      fmt::print(
          "epoch {}/{}  train loss {:.4f}  train acc {:.2f}%  test acc {:.2f}%  {:.1f} s  {:.0f} img/s  "
          "peak memory {:.1f} MiB  syncs {}\n",
          r.epoch, options.epochs, r.train_loss, 100 * r.train_accuracy, 100 * r.test_accuracy, r.seconds,
          r.images_per_second, static_cast<double>(r.peak_memory_bytes) / (1 << 20), r.synchronizations);
      std::fflush(stdout);
    };
    if (profiling) profiler::start();
    const std::vector<train::EpochReport> reports = trainer.run(on_step, on_epoch);
    if (profiling) write_profile(profile);
    if (trainer.stopped()) {
      if (bar) std::fputs(bar->clear().c_str(), stdout);
      const std::string where =
          trainer.steps_done() > 0    ? fmt::format("at step {}/{} of epoch {}/{}", trainer.steps_done(),
                                                    trainer.steps_per_epoch(), trainer.epochs_done() + 1, options.epochs)
          : trainer.epochs_done() > 0 ? fmt::format("after epoch {}/{}", trainer.epochs_done(), options.epochs)
                                      : std::string("before the first step");
      return report_stop(speaks, options.checkpoint.has_value(), checkpoint, where, argc, argv);
    }
    const double final_accuracy =
        reports.empty() ? trainer.evaluate(*subset(test_split, test_images)) : reports.back().test_accuracy;
    if (speaks && json) {
      nlohmann::json out{{"device", fmt::format("{}", options.device)},
                         {"ranks", world.size()},
                         {"recipe", recipe},
                         {"epochs", options.epochs},
                         {"batch_size", options.batch_size},
                         {"seed", options.seed},
                         {"final_test_accuracy", final_accuracy},
                         {"epoch_reports", nlohmann::json::array()}};
      for (const auto& r : reports) out["epoch_reports"].push_back(to_json(r));
      fmt::print("{}\n", out.dump(2));
    } else if (speaks) {
      fmt::print("final test accuracy: {:.2f}%\n", 100 * final_accuracy);
    }
  } catch (const Error& e) {
    // The training job's own messages already start with the tool's name.
    std::string_view what = e.what();
    if (what.starts_with("strata-train: ")) what.remove_prefix(std::string_view("strata-train: ").size());
    fmt::print(stderr, "strata-train: error: {}\n", what);
    return 1;
  }
  return tools::stdout_written("strata-train") ? 0 : 1;
}
