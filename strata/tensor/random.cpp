// rand, randn, randint and the per-device generators (Note [Random numbers on every device] in
// ops/factory_kernels.h).

#include "strata/tensor/random.h"

#include <limits>
#include <memory>
#include <unordered_map>

#include "strata/autograd/grad_mode.h"
#include "strata/core/error.h"
#include "strata/ops/factory_kernels.h"
#include "strata/runtime/registry.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
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
const ops::KernelSlot<ops::MultinomialFn> multinomial_slot("multinomial");

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

// Note [multinomial's checks]
// The weights are checked before the draw, with PyTorch's messages, on every device: a negative, infinite or NaN
// weight, a row that sums to zero, and (without replacement) a row with fewer positive weights than samples. Reading
// the three answers back synchronises with a GPU, which sampling does anyway to use its result; the kernel then
// never meets a row it cannot draw from.
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement, Generator* generator) {
  constexpr const char* op = "multinomial";
  STRATA_CHECK(weights.defined(), InvalidArgumentError, "{}: argument 0 is an undefined tensor", op);
  STRATA_CHECK(weights.dim() == 1 || weights.dim() == 2, ShapeError,
               "{}: prob_dist must be 1 or 2 dim, got a tensor of shape {}", op, weights.shape());
  STRATA_CHECK(is_floating(weights.dtype()), DTypeError, "{}: only supports floating-point dtypes for input, got {}",
               op, weights.dtype());
  STRATA_CHECK(num_samples > 0, InvalidArgumentError, "{}: cannot sample n_sample <= 0 samples (got {})", op,
               num_samples);
  const int64_t categories = weights.size(-1);
  STRATA_CHECK(replacement || num_samples <= categories, InvalidArgumentError,
               "{}: cannot sample n_sample > prob_dist.size(-1) samples without replacement ({} > {})", op, num_samples,
               categories);
  STRATA_CHECK(categories <= (int64_t{1} << 24), InvalidArgumentError,
               "{}: number of categories cannot exceed 2^24, got {}", op, categories);
  const int64_t rows = weights.dim() == 2 ? weights.size(0) : 1;
  const Shape out_shape = weights.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples};
  Tensor out = empty(out_shape, TensorOptions(DType::I64).device(weights.device()));
  if (rows == 0) return out;
  const Tensor w = weights.detach().reshape({rows, categories}).contiguous();
  {
    const NoGradGuard no_grad;
    const TensorOptions like = TensorOptions(w.dtype()).device(w.device());
    const Tensor invalid =
        logical_or(lt(w, scalar_tensor(0, like)),
                   logical_not(lt(abs(w), scalar_tensor(std::numeric_limits<double>::infinity(), like))));
    STRATA_CHECK(sum(invalid.to(DType::I64)).item<int64_t>() == 0, InvalidArgumentError,
                 "{}: probability tensor contains either `inf`, `nan` or element < 0", op);
    STRATA_CHECK(categories > 0 && min(sum(w.to(DType::F64), {1})).item<double>() > 0, InvalidArgumentError,
                 "{}: invalid multinomial distribution (sum of probabilities <= 0)", op);
    if (!replacement) {
      STRATA_CHECK(min(sum(ne(w, scalar_tensor(0, like)).to(DType::I64), {1})).item<int64_t>() >= num_samples,
                   InvalidArgumentError,
                   "{}: invalid multinomial distribution (with replacement=False, not enough non-negative category to "
                   "sample)",
                   op);
    }
  }
  Generator& g = generator != nullptr ? *generator : default_generator(weights.device());
  const auto per_row =
      static_cast<std::uint64_t>(ops::multinomial_blocks_per_row(categories, num_samples, replacement));
  const GeneratorState state = g.reserve(per_row * static_cast<std::uint64_t>(rows));
  multinomial_slot.get(weights.device())(detail::op_call(op, weights.device()), out.view(), w.view(), replacement,
                                         state.seed, state.offset);
  return out;
}

}  // namespace strata
