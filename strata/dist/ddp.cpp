#include "strata/dist/ddp.h"

#include <chrono>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::dist {

struct DistributedDataParallel::Bucket {
  std::vector<std::size_t> parameters;
  std::vector<int64_t> offsets;  // of each parameter in `flat`
  Tensor flat;
  std::size_t pending = 0;  // parameters of this pass still without a gradient
  std::shared_ptr<Work> work;
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                                                 DdpOptions options)
    : module_(std::move(module)), group_(group) {
  STRATA_CHECK(module_ != nullptr, InvalidArgumentError, "DistributedDataParallel: the module is null");
  STRATA_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_cap_bytes > 0, InvalidArgumentError,
               "DistributedDataParallel: bucket sizes must be positive");
  {
    // Every rank starts from rank 0's parameters and buffers.
    NoGradGuard no_grad;
    std::vector<std::shared_ptr<Work>> works;
    for (Tensor t : module_->parameters()) works.push_back(group_.broadcast(t, 0));
    for (Tensor t : module_->buffers()) works.push_back(group_.broadcast(t, 0));
    for (auto& w : works) w->wait();
  }
  for (const Tensor& p : module_->parameters()) {
    if (p.requires_grad()) parameters_.push_back(p);
  }
  bucket_of_.resize(parameters_.size());
  ready_grads_.resize(parameters_.size());
  // Note [Gradient buckets]: reverse order, a small first bucket, one dtype and device per bucket.
  std::size_t bytes = 0;
  for (std::size_t k = parameters_.size(); k-- > 0;) {
    const Tensor& p = parameters_[k];
    const std::size_t size = static_cast<std::size_t>(p.numel()) * p.element_size();
    const std::size_t cap = buckets_.size() <= 1 ? options.first_bucket_cap_bytes : options.bucket_cap_bytes;
    const bool fits = !buckets_.empty() && bytes + size <= cap &&
                      parameters_[buckets_.back()->parameters.front()].dtype() == p.dtype() &&
                      parameters_[buckets_.back()->parameters.front()].device() == p.device();
    if (!fits) {
      buckets_.push_back(std::make_unique<Bucket>());
      bytes = 0;
    }
    Bucket& b = *buckets_.back();
    b.offsets.push_back(b.parameters.empty() ? 0 : b.offsets.back() + parameters_[b.parameters.back()].numel());
    b.parameters.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += size;
  }
  for (auto& b : buckets_) {
    const Tensor& first = parameters_[b->parameters.front()];
    b->flat = zeros({b->offsets.back() + parameters_[b->parameters.back()].numel()},
                    TensorOptions(first.dtype()).device(first.device()));
  }
  for (std::size_t k = 0; k < parameters_.size(); ++k) {
    parameters_[k].register_post_accumulate_grad_hook([this, k](const Tensor&) { on_gradient(k); });
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<std::size_t>> layout;
  for (const auto& b : buckets_) layout.push_back(b->parameters);
  return layout;
}

void DistributedDataParallel::on_gradient(std::size_t parameter) {
  if (!sync_) return;
  // A pass that ended by an exception never reached its callback: its state is stale, and a new pass starts over.
  if (!in_pass_ || pass_ != autograd::backward_pass_id()) {
    in_pass_ = true;
    pass_ = autograd::backward_pass_id();
    for (auto& b : buckets_) b->work = nullptr;
    for (Tensor& g : ready_grads_) g = Tensor();
    next_bucket_ = 0;
    for (auto& b : buckets_) b->pending = b->parameters.size();
    autograd::queue_callback([this] { finish_backward(); });
  }
  STRATA_CHECK(!ready_grads_[parameter].defined(), InvalidArgumentError,
               "DistributedDataParallel: parameter {} got its gradient twice in one backward pass", parameter);
  ready_grads_[parameter] = parameters_[parameter].grad();
  --buckets_[bucket_of_[parameter]]->pending;
  start_ready_buckets();
}

void DistributedDataParallel::start_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) start(*buckets_[next_bucket_++]);
}

void DistributedDataParallel::start(Bucket& b) {
  for (std::size_t i = 0; i < b.parameters.size(); ++i) {
    const std::size_t k = b.parameters[i];
    Tensor slot = b.flat.narrow(0, b.offsets[i], parameters_[k].numel());
    if (ready_grads_[k].defined()) {
      slot.copy_(ready_grads_[k].reshape({-1}));
    } else {
      slot.fill_(0);  // no gradient in this pass on this rank: it contributes zeros to the average
    }
  }
  b.work = group_.all_reduce(b.flat, ReduceOp::Avg);
}

void DistributedDataParallel::finish_backward() {
  in_pass_ = false;
  // Buckets whose parameters got no gradient in this pass start now, still in order.
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) start(*buckets_[next_bucket_]);
  const auto begin = std::chrono::steady_clock::now();
  for (auto& b : buckets_) std::exchange(b->work, nullptr)->wait();
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  for (auto& b : buckets_) {
    for (std::size_t i = 0; i < b->parameters.size(); ++i) {
      const std::size_t k = b->parameters[i];
      Tensor& p = parameters_[k];
      const Tensor average = b->flat.narrow(0, b->offsets[i], p.numel()).view(p.shape());
      if (ready_grads_[k].defined()) {
        Tensor grad = p.grad();
        grad.copy_(average);
      } else {
        p.set_grad(average.clone());
      }
      ready_grads_[k] = Tensor();
    }
  }
}

}  // namespace strata::dist
