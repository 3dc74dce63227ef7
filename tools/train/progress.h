// strata-train's progress within an epoch: one line redrawn in place on a terminal, plain lines under an MPI
// launcher, nothing into a file or a pipe. Header-only, so that tests/tools/progress_test.cpp checks the frames.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

namespace strata::tools {

// Note [Progress under an MPI launcher]
// Open MPI starts each rank with a pseudo-terminal for its stdout and copies what the rank writes to mpirun's
// stdout, a terminal or a file. isatty() is then true on rank 0 even when mpirun's output goes to a file, and a
// bar redrawn with carriage returns leaves hundreds of frames on one line of that file. A rank started by an MPI
// launcher (Open MPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, MPICH's and Slurm's PMI_RANK) or one of a world of
// several ranks, therefore prints a plain line at each tenth of the epoch, which reads the same in a terminal and in
// a file. A process whose stdout is no terminal prints no progress at all (the epoch lines say it all).

enum class ProgressStyle { None, Redrawn, Lines };

/// Whether an MPI launcher started this process, from the variables it sets.
inline bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return true;
  }
  return false;
}

/// How the process that prints shows progress: none when stdout is no terminal, plain lines when it is one but an
/// MPI launcher made it (or the world has several ranks), a redrawn bar otherwise (Note [Progress under an MPI
/// launcher]).
inline ProgressStyle progress_style(bool stdout_is_terminal, bool under_mpi) {
  if (!stdout_is_terminal) return ProgressStyle::None;
  return under_mpi ? ProgressStyle::Lines : ProgressStyle::Redrawn;
}

/// The frames of one epoch's progress. The clock starts at the first step reported (the bar is made there), and
/// rates and the ETA count the steps after it over the time since: the first report would otherwise divide one
/// step's images by the microseconds since the bar was made ("108108108 img/s"). Until kMinSeconds have passed
/// and a step has completed since, no rate is shown.
class ProgressBar {
 public:
  static constexpr double kMinSeconds = 0.5;  // time over which a rate means something
  static constexpr int kWidth = 30;

  /// `first_step` is the step being reported when the bar is made (1, or the step a resumed epoch starts from),
  /// at time `now` in seconds on any steady clock.
  /// `unit` names what a step's `batch_size` counts ("img", or "tok" for a language model), `period` what the bar
  /// spans ("epoch", or "eval" for the iterations between two evaluations).
  ProgressBar(ProgressStyle style, int64_t epoch, int64_t epochs, int64_t batch_size, int64_t first_step, double now,
              std::string unit = "img", std::string period = "epoch")
      : style_(style),
        epoch_(epoch),
        epochs_(epochs),
        batch_size_(batch_size),
        first_step_(first_step),
        start_(now),
        unit_(std::move(unit)),
        period_(std::move(period)) {}

  int64_t epoch() const { return epoch_; }

  /// The text to write for step `step` of `steps` done at time `now` (empty when nothing is due): a redrawn bar at
  /// most every 0.1 s and cleared after the last step, or a line at each tenth of the epoch.
  std::string frame(int64_t step, int64_t steps, double now) {
    if (style_ == ProgressStyle::None || steps <= 0) return {};
    const double elapsed = now - start_;
    const bool rated = step > first_step_ && elapsed >= kMinSeconds;
    const double rate = rated ? static_cast<double>((step - first_step_) * batch_size_) / elapsed : 0;
    const double eta =
        rated ? elapsed / static_cast<double>(step - first_step_) * static_cast<double>(steps - step) : 0;
    const std::string rate_text =
        rated ? fmt::format("{:>6.0f} {}/s", rate, unit_) : fmt::format("{:>6} {}/s", "-", unit_);
    const std::string eta_text = rated ? fmt::format("ETA {:>4.0f}s", eta) : fmt::format("ETA {:>4}s", "-");
    if (style_ == ProgressStyle::Lines) {
      const int64_t tenth = step * 10 / steps;  // lines at 10%, 20%, ..., 90%; the epoch's own line says 100%
      if (tenth <= last_tenth_ || step == steps) return {};
      last_tenth_ = tenth;
      return fmt::format("{} {}/{}  step {}/{} ({}%)  {}  {}\n", period_, epoch_, epochs_, step, steps, tenth * 10,
                         rate_text, eta_text);
    }
    if (step == steps) return fmt::format("\r{:<100}\r", "");
    if (last_ >= 0 && elapsed - last_ < 0.1) return {};
    last_ = elapsed;
    const int filled = static_cast<int>(kWidth * std::clamp<int64_t>(step, 0, steps) / steps);
    return fmt::format("\r{} {}/{} [{:#<{}}{:.<{}}] {:>5}/{}  {}  {}", period_, epoch_, epochs_, "", filled, "",
                       kWidth - filled, step, steps, rate_text, eta_text);
  }

  /// What clears a redrawn bar left on the line (a stopped run), empty for the other styles.
  std::string clear() const { return style_ == ProgressStyle::Redrawn ? fmt::format("\r{:<100}\r", "") : ""; }

 private:
  ProgressStyle style_;
  int64_t epoch_, epochs_, batch_size_, first_step_;
  double start_;
  std::string unit_, period_;
  double last_ = -1;
  int64_t last_tenth_ = 0;
};

}  // namespace strata::tools
