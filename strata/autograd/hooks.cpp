#include "strata/autograd/hooks.h"

#include <algorithm>
#include <utility>

#include "strata/autograd/node.h"
#include "strata/core/error.h"

namespace strata::autograd {

namespace {

// Note [Finding a hook to remove]
// AutogradMeta keeps post-accumulate hooks as plain std::functions, which cannot be compared. A removable hook is
// stored as this callable, and the handle finds its entry again through std::function::target and the token: no
// change to how the engine stores and calls hooks, and hooks registered without a handle stay as they are.
struct TokenedHook {
  std::shared_ptr<const void> token;
  std::function<void(const Tensor&)> hook;
  void operator()(const Tensor& grad) const { hook(grad); }
};

}  // namespace

void RemovableHandle::remove() {
  const std::shared_ptr<const void> token = std::exchange(token_, nullptr);
  const std::shared_ptr<AutogradMeta> meta = meta_.lock();
  if (!token || !meta) return;
  std::erase_if(meta->post_accumulate_hooks, [&](const std::function<void(const Tensor&)>& f) {
    const TokenedHook* h = f.target<TokenedHook>();
    return h != nullptr && h->token == token;
  });
}

RemovableHandle register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor& grad)> hook) {
  STRATA_CHECK(static_cast<bool>(hook), InvalidArgumentError, "register_post_accumulate_grad_hook: the hook is empty");
  auto token = std::make_shared<int>(0);
  Tensor t = leaf;  // a handle to the same tensor: registering changes its autograd state, not the handle
  t.register_post_accumulate_grad_hook(TokenedHook{token, std::move(hook)});  // checks that it is a leaf
  return RemovableHandle(t.autograd_meta(), std::move(token));
}

}  // namespace strata::autograd
