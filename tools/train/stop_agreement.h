#pragma once

// How the ranks of a training run agree to stop at one step (strata-train's two tasks).

#include <memory>

#include "strata/dist/process_group.h"
#include "strata/tensor/tensor.h"

namespace strata::train {

// Note [Agreeing to stop without waiting]
// A signal may reach one rank only (a scheduler that signals one process, a Ctrl-C in one terminal), and a rank that
// stops alone leaves the others waiting in the next collective until it times out. So the ranks agree: after each
// step every rank contributes whether it was asked to stop, and all stop when any was. That was one blocking
// all-reduce per step, in the step's critical path: a round trip each step, 40 % of a step between two hosts 1 ms
// apart (docs/benchmarks.md, "Two hosts on one machine"). Now the all-reduce of step s is started after step s and
// waited for after step s + 1, when it has long completed behind that step's work: every rank learns the same
// answer at the same step, and stops one step after the first rank was asked to. Alone, a run stops at once.
class StopAgreement {
 public:
  /// `group` null or of one rank: no collective, the wish decides.
  explicit StopAgreement(dist::ProcessGroup* group) : group_(group) {}
  ~StopAgreement();
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  /// Called by every rank after each step with whether this rank was asked to stop; true when all stop now. Once true
  /// it stays true.
  bool after_step(bool wish);
  bool agreed() const { return agreed_; }
  /// Waits for the all-reduce in flight, so that the collectives that follow (an epoch's sums) find none before them
  /// on any rank; its answer still counts.
  void settle();

 private:
  dist::ProcessGroup* group_;
  Tensor flag_;  // this rank's wish, then the world's, of the step in flight
  std::shared_ptr<dist::Work> pending_;
  bool agreed_ = false;
};

}  // namespace strata::train
