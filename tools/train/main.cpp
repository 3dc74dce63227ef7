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
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "strata/core/error.h"
#include "strata/data/fashion_mnist.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/profiler.h"
#include "progress.h"
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
std::mutex g_stop_mutex;              // guards the two below
train::Trainer* g_trainer = nullptr;  // the run to stop, while it exists
int g_signal = 0;                     // the first signal taken, 0 before one

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
      if (g_trainer != nullptr) g_trainer->request_stop();
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
  explicit StopTarget(train::Trainer& trainer) {
    std::lock_guard lock(g_stop_mutex);
    g_trainer = &trainer;
    if (g_signal != 0) trainer.request_stop();
  }
  ~StopTarget() {
    std::lock_guard lock(g_stop_mutex);
    g_trainer = nullptr;
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
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
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

}  // namespace

int main(int argc, char** argv) {
  start_stop_signal_thread();  // before any other thread starts (Note [A clean stop on SIGINT and SIGTERM])
  CLI::App app{"strata-train: trains the reference CNN on Fashion-MNIST"};
  train::TrainOptions options;
  std::string device = "best";
  std::string recipe = "reference";
  std::string data_dir = std::string(data::kFashionMnistDir);
  std::string checkpoint;
  std::string logdir;
  std::string profile;
  double lr = 0;
  int64_t train_images = 0, test_images = 0;
  bool json = false;
  const auto positive = number_check<int64_t>(1, "a positive integer");
  const auto count = number_check<int64_t>(0, "an integer >= 0");
  app.add_option("--epochs", options.epochs, "epochs to train")->capture_default_str()->check(positive);
  app.add_option("--batch-size", options.batch_size, "images per step")->capture_default_str()->check(positive);
  app.add_option("--lr", lr, "learning rate (default: the recipe's, 0.01 reference / 0.002 fast)")
      ->check(number_check<double>(std::numeric_limits<double>::denorm_min(), "a positive number"));
  app.add_option("--seed", options.seed, "seed of initialisation, shuffling and augmentation")
      ->capture_default_str()
      ->check(number_check<uint64_t>(0, "an integer from 0 to 2^64-1"));
  app.add_option("--device", device, "cpu, cuda, cuda:N, or best (a GPU when there is one)")->capture_default_str();
  app.add_option("--recipe", recipe,
                 "reference: SGD lr 0.01 momentum 0.9; fast: Adam, cosine schedule, horizontal flips")
      ->capture_default_str()
      ->check(CLI::IsMember({"reference", "fast"}));
  app.add_option("--data", data_dir, "directory with the Fashion-MNIST IDX files")->capture_default_str();
  app.add_option("--checkpoint", checkpoint,
                 "safetensors file written after every epoch and when SIGINT or SIGTERM stops the run (exit 130 or "
                 "143); FILE.lock keeps a second run off it");
  app.add_flag("--resume", options.resume,
               "continue from --checkpoint when it exists; its settings (epochs, lr, batch size, seed, recipe, "
               "image counts) must be this run's");
  app.add_flag("--resume-with-changes", options.accept_changes,
               "like --resume, but continue with this run's settings where they differ from the checkpoint's: the "
               "result then matches no uninterrupted run (the recipe, and inside an epoch the batch size and "
               "training images, still cannot change)");
  app.add_option("--train-images", train_images, "train on the first N images only (0: all)")->check(count);
  app.add_option("--test-images", test_images, "test on the first N images only (0: all)")->check(count);
  app.add_option("--logdir", logdir,
                 "write TensorBoard event files into DIR: each step's loss and learning rate, each epoch's figures, "
                 "peak memory, copies and synchronisations (view with: tensorboard --logdir DIR)");
  app.add_option("--profile", profile,
                 "record the training's ops, copies, synchronisations and allocator events and write them to FILE "
                 "as a Chrome trace (open in Perfetto or chrome://tracing); the top ops by time go to stderr");
  app.add_flag("--json", json, "print one JSON document instead of lines");
  CLI11_PARSE(app, argc, argv);
  options.resume = options.resume || options.accept_changes;

  try {
    // Under mpirun the world is every rank (Note [Training on several ranks]); "best" is then this rank's GPU.
    dist::ProcessGroup& world = dist::init();
    options.group = &world;
    const bool speaks = world.rank() == 0;  // rank 0 alone prints
    options.device = device == "best" ? dist::local_device() : Device(device);
    options.recipe = recipe == "fast" ? train::Recipe::Fast : train::Recipe::Reference;
    if (app.count("--lr") > 0) options.lr = lr;
    if (app.count("--checkpoint") > 0) options.checkpoint = checkpoint;
    // Opened before the data is read, so that a directory that cannot be written is refused before any work.
    std::optional<train::TrainingLog> log;  // rank 0 writes (Note [What --logdir writes])
    if (app.count("--logdir") > 0 && speaks) log.emplace(logdir, options.device);
    options.record_steps = log.has_value();
    // Likewise the profile: an unwritable FILE is refused now, not after the run (Note [The profiler]).
    const bool profiling = app.count("--profile") > 0 && speaks;
    if (profiling) {
      STRATA_CHECK(!profiler::is_enabled(), InvalidArgumentError,
                   "--profile {}: STRATA_PROFILE already records this run; use one of the two", profile);
      profiler::check_writable(profile);
    }

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
    const auto seconds = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
    auto on_step = [&](int64_t step, int64_t steps) {
      if (style == tools::ProgressStyle::None) return;
      // A new bar at an epoch's first step reported: 1, or where a resumed epoch goes on.
      if (!bar || bar->epoch() != trainer.epochs_done() + 1) {
        // Images per step of the world, as the epoch's line counts them.
        bar = std::make_unique<tools::ProgressBar>(style, trainer.epochs_done() + 1, options.epochs,
                                                   options.batch_size * world.size(), step, seconds());
      }
      const std::string frame = bar->frame(step, steps, seconds());
      if (!frame.empty()) {
        std::fputs(frame.c_str(), stdout);
        std::fflush(stdout);
      }
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
    if (profiling) {
      const profiler::Result result = profiler::stop();
      result.export_chrome_trace(profile);
      fmt::print(stderr, "strata-train: profile of {} events written to {}\n{}", result.events().size(), profile,
                 result.table("cpu_time_total", 10));
    }
    if (trainer.stopped()) {
      if (bar) std::fputs(bar->clear().c_str(), stdout);
      std::fflush(stdout);
      const int signal = StopTarget::signal();
      const std::string where =
          trainer.steps_done() > 0   ? fmt::format("at step {}/{} of epoch {}/{}", trainer.steps_done(),
                                                   trainer.steps_per_epoch(), trainer.epochs_done() + 1, options.epochs)
          : trainer.epochs_done() > 0 ? fmt::format("after epoch {}/{}", trainer.epochs_done(), options.epochs)
                                      : std::string("before the first step");
      const std::string name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a stop request";
      if (speaks && options.checkpoint) {  // rank 0 says where the world stopped
        fmt::print(stderr, "strata-train: stopped by {} {}; saved in {}; resume with: {}\n", name,
                   where, checkpoint, resume_command(argc, argv));
      } else if (speaks) {
        fmt::print(stderr, "strata-train: stopped by {} {}; without --checkpoint nothing was saved\n", name, where);
      }
      return 128 + (signal != 0 ? signal : SIGTERM);
    }
    const double final_accuracy = reports.empty() ? trainer.evaluate(*subset(test_split, test_images))
                                                  : reports.back().test_accuracy;
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
