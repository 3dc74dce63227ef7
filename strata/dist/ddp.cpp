#include "strata/dist/ddp.h"

#include <chrono>
#include <utility>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"

namespace strata::dist {

struct GradientReducer::Bucket {
  std::vector<std::size_t> parameters;
  std::vector<int64_t> offsets;  // of each parameter in `flat`
  int64_t numel = 0;             // of the gradients; `flat` holds one usage flag per parameter after them
  Tensor flat;
  std::size_t pending = 0;  // parameters of this pass still without a gradient
  std::shared_ptr<Work> work;

  Tensor slot(std::size_t i, const Tensor& p) const { return flat.narrow(0, offsets[i], p.numel()); }
  Tensor flags() const { return flat.narrow(0, numel, static_cast<int64_t>(parameters.size())); }
};

namespace {

// Whether `grad` is the very slot of the bucket (Note [Gradients as bucket views]).
bool is_slot(const Tensor& grad, const Tensor& slot) {
  return grad.defined() && grad.data_ptr() == slot.data_ptr() && grad.numel() == slot.numel() &&
         grad.dtype() == slot.dtype() && grad.is_contiguous();
}

}  // namespace

GradientReducer::GradientReducer(std::vector<Tensor> parameters, ProcessGroup& group, const DdpOptions& options)
    : group_(group), as_view_(options.gradient_as_bucket_view), parameters_(std::move(parameters)) {
  STRATA_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_cap_bytes > 0, InvalidArgumentError,
               "DistributedDataParallel: bucket sizes must be positive");
  for (std::size_t k = 0; k < parameters_.size(); ++k) {
    const Tensor& p = parameters_[k];
    STRATA_CHECK(p.defined() && p.requires_grad() && p.is_leaf() && is_floating(p.dtype()), InvalidArgumentError,
                 "DistributedDataParallel: parameter {} must be a floating leaf that requires grad", k);
  }
  bucket_of_.resize(parameters_.size());
  used_.assign(parameters_.size(), 0);
  ready_.assign(parameters_.size(), 0);
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
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
    b.parameters.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += size;
  }
  for (auto& b : buckets_) {
    const Tensor& first = parameters_[b->parameters.front()];
    b->flat = zeros({b->numel + static_cast<int64_t>(b->parameters.size())},
                    TensorOptions(first.dtype()).device(first.device()));
  }
  hooks_.reserve(parameters_.size());
  for (std::size_t k = 0; k < parameters_.size(); ++k) {
    hooks_.push_back(
        autograd::register_post_accumulate_grad_hook(parameters_[k], [this, k](const Tensor&) { on_gradient(k); }));
  }
}

GradientReducer::~GradientReducer() {
  for (auto& hook : hooks_) hook.remove();
  // A collective still in flight (a backward that ended by an exception) writes into the buckets: wait for it before
  // they are freed. Its error, if any, has nobody left to report to.
  for (auto& b : buckets_) {
    if (!b->work) continue;
    try {
      b->work->wait();
    } catch (const std::exception&) {
    }
  }
}

std::vector<std::vector<std::size_t>> GradientReducer::bucket_layout() const {
  std::vector<std::vector<std::size_t>> layout;
  for (const auto& b : buckets_) layout.push_back(b->parameters);
  return layout;
}

void GradientReducer::on_gradient(std::size_t parameter) {
  used_[parameter] = 1;  // Note [Parameters that a pass did not use]: no_sync passes count too
  if (!sync_) return;
  // A pass that ended by an exception never reached its callback: its state is stale, and a new pass starts over.
  if (!in_pass_ || pass_ != autograd::backward_pass_id()) {
    in_pass_ = true;
    pass_ = autograd::backward_pass_id();
    for (auto& b : buckets_) {
      if (b->work) {
        try {
          std::exchange(b->work, nullptr)->wait();  // every rank issued it; its result is stale
        } catch (const std::exception&) {
        }
      }
    }
    std::fill(ready_.begin(), ready_.end(), 0);
    next_bucket_ = 0;
    for (auto& b : buckets_) b->pending = b->parameters.size();
    autograd::queue_callback([this] { finish_backward(); });
  }
  STRATA_CHECK(!ready_[parameter], InvalidArgumentError,
               "DistributedDataParallel: parameter {} got its gradient twice in one backward pass", parameter);
  ready_[parameter] = 1;
  --buckets_[bucket_of_[parameter]]->pending;
  start_ready_buckets();
}

void GradientReducer::start_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) start(*buckets_[next_bucket_++]);
}

void GradientReducer::start(Bucket& b) {
  NoGradGuard no_grad;
  bool all_used = true;
  std::vector<float> flags(b.parameters.size());
  for (std::size_t i = 0; i < b.parameters.size(); ++i) {
    const std::size_t k = b.parameters[i];
    Tensor& p = parameters_[k];
    Tensor slot = b.slot(i, p);
    Tensor grad = p.grad();
    // Usage since the last reduction; a gradient the user dropped since (set to none) counts as none.
    if (used_[k] && grad.defined()) {
      if (!is_slot(grad, slot)) {
        slot.copy_(grad.reshape({-1}));
        if (as_view_) p.set_grad(slot.view(p.shape()));  // Note [Gradients as bucket views]
      }
      flags[i] = 1;
    } else {
      if (is_slot(grad, slot)) p.set_grad(grad.clone());  // keeps its values should no rank have used it
      slot.fill_(0);
      all_used = false;
    }
  }
  if (all_used) {
    b.flags().fill_(1);
  } else {
    b.flags().copy_(tensor<float>(flags).to(b.flat.dtype()));
  }
  b.work = group_.all_reduce(b.flat, ReduceOp::Avg);
}

void GradientReducer::finish_backward() {
  in_pass_ = false;
  // Buckets whose parameters got no gradient in this pass start now, still in order.
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) start(*buckets_[next_bucket_]);
  const auto begin = std::chrono::steady_clock::now();
  for (auto& b : buckets_) std::exchange(b->work, nullptr)->wait();
  last_wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  NoGradGuard no_grad;
  for (auto& b : buckets_) {
    // Note [Parameters that a pass did not use]: nonzero where some rank used the parameter.
    const std::vector<float> used = b->flags().to(kCPU).to(DType::F32).to_vector<float>();
    for (std::size_t i = 0; i < b->parameters.size(); ++i) {
      const std::size_t k = b->parameters[i];
      used_[k] = 0;
      if (used[i] == 0) continue;  // no rank used it: its gradient stays as it was
      Tensor& p = parameters_[k];
      const Tensor average = b->slot(i, p).view(p.shape());
      Tensor grad = p.grad();
      if (is_slot(grad, average)) continue;  // the average is already in place
      if (as_view_) {
        p.set_grad(average);
      } else if (grad.defined()) {
        grad.copy_(average);
      } else {
        p.set_grad(average.clone());
      }
    }
  }
}

namespace {

std::vector<Tensor> trained_parameters(const nn::Module& module, std::vector<std::size_t>* indices) {
  std::vector<Tensor> out;
  const std::vector<Tensor> all = module.parameters();
  for (std::size_t k = 0; k < all.size(); ++k) {
    if (!all[k].requires_grad()) continue;
    out.push_back(all[k]);
    indices->push_back(k);
  }
  return out;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                                                 DdpOptions options)
    : module_(std::move(module)), group_(group) {
  STRATA_CHECK(module_ != nullptr, InvalidArgumentError, "DistributedDataParallel: the module is null");
  {
    // Every rank starts from rank 0's parameters and buffers.
    NoGradGuard no_grad;
    std::vector<std::shared_ptr<Work>> works;
    for (Tensor t : module_->parameters()) works.push_back(group_.broadcast(t, 0));
    for (Tensor t : module_->buffers()) works.push_back(group_.broadcast(t, 0));
    for (auto& w : works) w->wait();
  }
  reducer_ = std::make_unique<GradientReducer>(trained_parameters(*module_, &trained_), group_, options);
}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(const Tensor& input) {
  auto* layer = dynamic_cast<nn::Layer*>(module_.get());
  STRATA_CHECK(layer != nullptr, InvalidArgumentError,
               "DistributedDataParallel: the wrapped {} has no forward of one input (it is not an nn::Layer); call "
               "module() and run it as it runs",
               module_->describe());
  return (*layer)(input);
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<std::size_t>> layout = reducer_->bucket_layout();
  for (auto& bucket : layout) {
    for (std::size_t& k : bucket) k = trained_[k];
  }
  return layout;
}

}  // namespace strata::dist
