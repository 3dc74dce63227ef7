// rand, randn, randint and the per-device generators (Note [Random numbers on every device] in
// ops/factory_kernels.h).

#include "strata/tensor/random.h"

#include <limits>
#include <memory>
#include <unordered_map>

#include "strata/core/error.h"
#include "strata/ops/factory_kernels.h"
#include "strata/runtime/registry.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/op_call.h"
#include "strata/tensor/op_checks.h"

namespace strata {

std::uint64_t Generator::seed() const { return state().seed; }

void Generator::manual_seed(std::uint64_t seed) { set_state({seed, 0}); }

GeneratorState Generator::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void Generator::set_state(GeneratorState state) {
  std::lock_guard lock(mutex_);
  state_ = state;
}

GeneratorState Generator::reserve(std::uint64_t blocks) {
  std::lock_guard lock(mutex_);
  const GeneratorState drawn = state_;
  state_.offset += blocks;
  return drawn;
}

namespace {

struct Generators {
  std::mutex mutex;
  std::uint64_t seed = Generator::kDefaultSeed;  // for generators created after manual_seed
  std::unordered_map<Device, std::unique_ptr<Generator>> by_device;
};

Generators& generators() {
  static Generators g;
  return g;
}

const ops::KernelSlot<ops::RandomFn> random_slot("random");

Tensor random_tensor(const char* op, const Shape& shape, const TensorOptions& options, ops::RandomSpec spec) {
  Tensor out = empty(shape, options);
  const int64_t n = out.numel();
  if (n == 0) return out;
  const auto per_block = ops::random_values_per_block(spec.distribution, out.dtype());
  const GeneratorState state =
      default_generator(out.device()).reserve(static_cast<std::uint64_t>((n + per_block - 1) / per_block));
  spec.seed = state.seed;
  spec.offset = state.offset;
  random_slot.get(out.device())(detail::op_call(op, out.device()), out.view(), spec);
  return out;
}

void check_floating(const char* op, DType dtype) {
  STRATA_CHECK(is_floating(dtype), DTypeError, "{}: expected a floating dtype (f16, bf16, f32, f64), got {}", op,
               dtype);
}

}  // namespace

Generator& default_generator(Device device) {
  device = resolve(device);
  Generators& g = generators();
  std::lock_guard lock(g.mutex);
  std::unique_ptr<Generator>& slot = g.by_device[device];
  if (!slot) slot = std::make_unique<Generator>(g.seed);
  return *slot;
}

void manual_seed(std::uint64_t seed) {
  Generators& g = generators();
  std::lock_guard lock(g.mutex);
  g.seed = seed;
  for (auto& [device, generator] : g.by_device) generator->manual_seed(seed);
}

Tensor rand(const Shape& shape, TensorOptions options) {
  check_floating("rand", options.dtype_);
  return random_tensor("rand", shape, options, {ops::Distribution::Uniform});
}

Tensor randn(const Shape& shape, TensorOptions options) {
  check_floating("randn", options.dtype_);
  return random_tensor("randn", shape, options, {ops::Distribution::Normal});
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options) {
  STRATA_CHECK(low < high, InvalidArgumentError, "randint: low ({}) must be below high ({})", low, high);
  if (is_integral(options.dtype_)) {
    const auto [min, max] = detail::integral_range(options.dtype_);
    STRATA_CHECK(low >= min && high - 1 <= max, InvalidArgumentError,
                 "randint: the range [{}, {}) does not fit dtype {}, which holds [{}, {}]", low, high, options.dtype_,
                 min, max);
  }
  return random_tensor("randint", shape, options, {ops::Distribution::Integers, 0, 0, low, high});
}

}  // namespace strata
