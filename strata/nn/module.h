#pragma once

// Modules: trees of named parameters, buffers and child modules (PyTorch's nn.Module, LibTorch's torch::nn::Module).

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::nn {

/// Tensors by (dotted) name, in insertion order: what state_dict() returns and load_state_dict() reads.
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  /// Adds `name`, or replaces its tensor when present (keeping its position).
  void insert(std::string name, Tensor value);
  /// The tensor stored under `name`, or nullptr.
  const Tensor* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  /// The tensor stored under `name`; InvalidArgumentError naming the key otherwise.
  const Tensor& at(std::string_view name) const;
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

/// A node of a model: its own parameters and buffers, and child modules, each under a name, in registration order.
/// Parameter and buffer tensors are handles: Module::to moves them in place (Tensor::set_data), so a handle kept
/// elsewhere (a layer's `weight` member, an optimizer) sees the moved data (see docs/architecture.md, Copies).
/// What Module::to does to each parameter and buffer: replaces t's data, and its gradient's, by what `convert` makes
/// of them, keeping every handle's identity (optimizers and layers holding the tensor follow).
void convert_in_place(Tensor t, const std::function<Tensor(const Tensor&)>& convert);

class Module {
 public:
  /// `type_name` is the class name shown in errors ("Linear").
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  const std::string& type_name() const { return type_name_; }
  /// Dotted path under the root this module was registered in ("features.0"); empty for a root.
  const std::string& path() const { return path_; }
  /// "Linear 'features.0'", or "Linear" for a root: how errors name this module.
  std::string describe() const;

  /// Registers a parameter (marked requires_grad when floating and `requires_grad`); returns the stored handle.
  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  /// Registers a buffer: state that is saved and moved but not trained (BatchNorm's running statistics).
  Tensor& register_buffer(const std::string& name, Tensor value);
  /// Makes the registered parameter `name` this very tensor, which forward then reads: weight tying, as PyTorch's
  /// `decoder.weight = embedding.weight`. Shared, not copied: both users accumulate into one gradient.
  void replace_parameter(const std::string& name, const Tensor& value);
  /// Registers a child module; its parameters appear as "<name>.<its name>".
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  /// Parameters of this module and (when `recurse`) its descendants, with dotted names, in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// The same parameters without names, each tensor once (a module shared by two places lists its own once).
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Direct children.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  std::vector<std::shared_ptr<Module>> children() const;
  /// This module (named "") and every descendant, depth first, with dotted names.
  std::vector<std::pair<std::string, Module*>> named_modules();

  /// Sets training mode on this module and every descendant (Dropout and BatchNorm behave differently).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Clears the gradients of every parameter: drops them (`set_to_none`, PyTorch's default) or fills them with 0.
  void zero_grad(bool set_to_none = true);

  /// Parameters then buffers of each module, depth first, by dotted name. The tensors are the live handles.
  StateDict state_dict() const;
  /// Copies `dict`'s values into the existing tensors (converting dtype, copying to their device). Every key is
  /// checked first: missing keys and unexpected keys (when `strict`) and shape mismatches (always) throw one
  /// InvalidArgumentError listing them all, and nothing is modified.
  void load_state_dict(const StateDict& dict, bool strict = true);

  /// Moves every parameter, buffer and gradient to `device` in place (the handles keep their identity).
  Module& to(Device device);
  /// Converts every floating parameter, buffer and gradient to `dtype` in place; integer buffers stay as they are.
  Module& to(DType dtype);

 protected:
  /// Throws DeviceMismatchError naming this module and the first own parameter or buffer not on input's device.
  void check_device(const Tensor& input) const;
  /// The member in which a layer keeps parameter `name` for its forward (replace_parameter updates it too); nullptr
  /// when the parameter lives only in the registry.
  virtual Tensor* parameter_member(const std::string& name);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  void set_path(const std::string& path);
  template <typename F>
  void for_each_module(const std::string& prefix, F&& f) const;

  std::string type_name_;
  std::string path_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// A module with one input and one output: what Sequential holds.
class Layer : public Module {
 public:
  using Module::Module;
  /// The computation; call the layer through operator(), which checks the input's device first.
  virtual Tensor forward(const Tensor& input) = 0;
  /// Checks that `input` is on the device of this layer's parameters (DeviceMismatchError naming the layer and
  /// the parameter otherwise), then runs forward.
  Tensor operator()(const Tensor& input) {
    check_device(input);
    return forward(input);
  }
};

}  // namespace strata::nn
