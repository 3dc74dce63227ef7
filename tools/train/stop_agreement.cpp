#include "stop_agreement.h"

#include "strata/tensor/factories.h"

namespace strata::train {

StopAgreement::~StopAgreement() {
  // A collective in flight holds flag_; it completes on every rank, since every rank started it.
  try {
    if (pending_) pending_->wait();
  } catch (...) {  // a failed world reported its error at the collective that saw it first
  }
}

void StopAgreement::settle() {
  if (!pending_) return;
  const std::shared_ptr<dist::Work> work = std::move(pending_);
  work->wait();
  agreed_ = agreed_ || flag_.item<int32_t>() != 0;
}

bool StopAgreement::after_step(bool wish) {
  if (group_ == nullptr || group_->size() == 1) return agreed_ = agreed_ || wish;
  settle();  // the previous step's answer, long in
  flag_ = tensor<int32_t>({wish ? 1 : 0});
  pending_ = group_->all_reduce(flag_, dist::ReduceOp::Max);
  return agreed_;
}

}  // namespace strata::train
