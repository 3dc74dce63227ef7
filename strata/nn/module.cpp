#include "strata/nn/module.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"

namespace strata::nn {

// --- StateDict ---

void StateDict::insert(std::string name, Tensor value) {
  if (auto it = index_.find(name); it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(value));
}

const Tensor* StateDict::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor& StateDict::at(std::string_view name) const {
  const Tensor* t = find(name);
  STRATA_CHECK(t != nullptr, InvalidArgumentError, "StateDict: no key '{}'", name);
  return *t;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [name, t] : items_) out.push_back(name);
  return out;
}

// --- Module: registration ---

std::string Module::describe() const {
  return path_.empty() ? type_name_ : fmt::format("{} '{}'", type_name_, path_);
}

void Module::check_new_name(const std::string& name, const char* what) const {
  STRATA_CHECK(!name.empty() && name.find('.') == std::string::npos, InvalidArgumentError,
               "{}: register_{}: the name '{}' must be non-empty and contain no '.'", describe(), what, name);
  const auto taken = [&](const auto& list) {
    for (const auto& item : list) {
      if (item.first == name) return true;
    }
    return false;
  };
  STRATA_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), InvalidArgumentError,
               "{}: register_{}: the name '{}' is already taken", describe(), what, name);
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name, "parameter");
  STRATA_CHECK(value.defined(), InvalidArgumentError, "{}: register_parameter: '{}' is an undefined tensor",
               describe(), name);
  if (requires_grad && is_floating(value.dtype())) value.requires_grad_(true);
  parameters_.emplace_back(name, std::move(value));
  return parameters_.back().second;
}

void Module::replace_parameter(const std::string& name, const Tensor& value) {
  STRATA_CHECK(value.defined(), InvalidArgumentError, "{}: replace_parameter: '{}' would be an undefined tensor",
               describe(), name);
  for (auto& [own_name, tensor] : parameters_) {
    if (own_name != name) continue;
    tensor = value;
    if (Tensor* member = parameter_member(name)) *member = value;
    return;
  }
  STRATA_THROW(InvalidArgumentError, "{}: replace_parameter: no parameter named '{}'", describe(), name);
}

Tensor* Module::parameter_member(const std::string&) { return nullptr; }

Tensor& Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name, "buffer");
  STRATA_CHECK(value.defined(), InvalidArgumentError, "{}: register_buffer: '{}' is an undefined tensor", describe(),
               name);
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  STRATA_CHECK(module != nullptr, InvalidArgumentError, "{}: register_module: '{}' is null", describe(), name);
  // A module may not hold itself, directly or through its children: every traversal would go round for ever. The
  // tree below `module` has no cycle (each registration was checked), so this search ends.
  bool cycle = false;
  module->for_each_module("", [&](const std::string&, const Module& m) { cycle = cycle || &m == this; });
  STRATA_CHECK(!cycle, InvalidArgumentError,
               "{}: register_module: '{}' is this module or holds it, which would make the module tree a cycle",
               describe(), name);
  module->set_path(path_.empty() ? name : path_ + "." + name);
  children_.emplace_back(name, std::move(module));
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, child] : children_) child->set_path(path_ + "." + name);
}

// --- Module: traversal ---

template <typename F>
void Module::for_each_module(const std::string& prefix, F&& f) const {
  f(prefix, *this);
  for (const auto& [name, child] : children_) {
    child->for_each_module(prefix.empty() ? name : prefix + "." + name, f);
  }
}

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  if (!recurse) return parameters_;
  std::vector<std::pair<std::string, Tensor>> out;
  for_each_module("", [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.parameters_) out.emplace_back(join(prefix, name), t);
  });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  // Each tensor once, as PyTorch's parameters(): a module shared by two places (tied weights) holds the same
  // parameters under two names, and an optimizer must step them once.
  // Found through their storage, so that zero_grad() on a large model stays linear in its parameter count.
  std::vector<Tensor> out;
  std::unordered_map<const Storage*, std::vector<std::size_t>> by_storage;
  for (auto& item : named_parameters(recurse)) {
    std::vector<std::size_t>& same_storage = by_storage[item.second.storage().get()];
    const bool seen = std::any_of(same_storage.begin(), same_storage.end(),
                                  [&](std::size_t i) { return out[i].is_same(item.second); });
    if (seen) continue;
    same_storage.push_back(out.size());
    out.push_back(std::move(item.second));
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  if (!recurse) return buffers_;
  std::vector<std::pair<std::string, Tensor>> out;
  for_each_module("", [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.buffers_) out.emplace_back(join(prefix, name), t);
  });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& item : named_buffers(recurse)) out.push_back(std::move(item.second));
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  for_each_module("", [&](const std::string& prefix, const Module& m) {
    out.emplace_back(prefix, const_cast<Module*>(&m));  // for_each_module is const only to serve const callers
  });
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.fill_(0);
    }
  }
}

// --- Module: state ---

StateDict Module::state_dict() const {
  StateDict dict;
  for_each_module("", [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.parameters_) dict.insert(join(prefix, name), t);
    for (const auto& [name, t] : m.buffers_) dict.insert(join(prefix, name), t);
  });
  return dict;
}

void Module::load_state_dict(const StateDict& dict, bool strict) {
  const StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, misshaped;
  for (const auto& [name, t] : own) {
    const Tensor* src = dict.find(name);
    if (src == nullptr) {
      missing.push_back(name);
    } else if (!src->defined() || src->shape() != t.shape()) {
      misshaped.push_back(fmt::format("{} (checkpoint {}, module {})", name,
                                      src->defined() ? shape_str(src->shape()) : "undefined", t.shape()));
    }
  }
  for (const auto& [name, t] : dict) {
    if (!own.contains(name)) unexpected.push_back(name);
  }
  const bool key_errors = strict && (!missing.empty() || !unexpected.empty());
  if (key_errors || !misshaped.empty()) {
    std::string message = fmt::format("load_state_dict: {} does not match the state dict; nothing was loaded.",
                                      describe());
    if (strict && !missing.empty()) message += fmt::format("\n  missing keys: {}", fmt::join(missing, ", "));
    if (strict && !unexpected.empty()) message += fmt::format("\n  unexpected keys: {}", fmt::join(unexpected, ", "));
    if (!misshaped.empty()) message += fmt::format("\n  mis-shaped keys: {}", fmt::join(misshaped, "; "));
    throw InvalidArgumentError(message);
  }
  NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    const Tensor* src = dict.find(name);
    if (src == nullptr) continue;
    Tensor dst = t;
    // Loading is an explicit request to copy, so a checkpoint on another device is copied here (as PyTorch does).
    dst.copy_(src->to(dst.device()));
  }
}

void convert_in_place(Tensor t, const std::function<Tensor(const Tensor&)>& convert) {
  Tensor moved = convert(t);
  if (!moved.is_same(t)) t.set_data(moved);
  Tensor g = t.grad();
  if (g.defined()) {
    Tensor moved_grad = convert(g);
    if (!moved_grad.is_same(g)) g.set_data(moved_grad);
  }
}

Module& Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& t : parameters()) convert_in_place(t, [&](const Tensor& x) { return x.to(device); });
  for (auto& t : buffers()) convert_in_place(t, [&](const Tensor& x) { return x.to(device); });
  return *this;
}

Module& Module::to(DType dtype) {
  STRATA_CHECK(is_floating(dtype), DTypeError, "{}: to({}): modules convert to floating dtypes only", describe(),
               dtype);
  NoGradGuard no_grad;
  const auto convert = [&](const Tensor& x) { return is_floating(x.dtype()) ? x.to(dtype) : x; };
  for (auto& t : parameters()) convert_in_place(t, convert);
  for (auto& t : buffers()) convert_in_place(t, convert);
  return *this;
}

void Module::check_device(const Tensor& input) const {
  const Device device = input.device();
  const auto check = [&](const std::vector<std::pair<std::string, Tensor>>& list, const char* what) {
    for (const auto& [name, t] : list) {
      STRATA_CHECK(t.device() == device, DeviceMismatchError,
                   "{}: the input is on {} but {} '{}' is on {}; move the input (input.to({})) or the module "
                   "(module.to({})) first",
                   describe(), device, what, name, t.device(), t.device(), device);
    }
  };
  check(parameters_, "parameter");
  check(buffers_, "buffer");
}

}  // namespace strata::nn
