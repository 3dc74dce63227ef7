// arange, linspace and eye: the arguments are checked here once, the values are written by a kernel of the device.

#include <cmath>
#include <limits>

#include "strata/core/error.h"
#include "strata/ops/factory_kernels.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/op_call.h"

namespace strata {

namespace {

const ops::KernelSlot<ops::ArangeFn> arange_slot("arange");
const ops::KernelSlot<ops::LinspaceFn> linspace_slot("linspace");
const ops::KernelSlot<ops::EyeFn> eye_slot("eye");

std::string scalar_str(const Scalar& s) {
  return s.is_floating() ? fmt::format("{}", s.to_double()) : fmt::format("{}", s.to_int());
}

bool is_whole(const Scalar& s) { return !s.is_floating() || std::trunc(s.to_double()) == s.to_double(); }

// Number of values of arange: ceil((end - start) / step), exactly when all three are integers.
int64_t arange_count(const Scalar& start, const Scalar& end, const Scalar& step) {
  if (!start.is_floating() && !end.is_floating() && !step.is_floating()) {
    const auto distance = static_cast<__int128>(end.to_int()) - start.to_int();
    const __int128 s = step.to_int();
    const __int128 count = (distance + s - (s > 0 ? 1 : -1)) / s;
    STRATA_CHECK(count <= std::numeric_limits<int64_t>::max(), InvalidArgumentError,
                 "arange: start {}, end {} and step {} give too many values", scalar_str(start), scalar_str(end),
                 scalar_str(step));
    return static_cast<int64_t>(count);
  }
  const double count = std::ceil((end.to_double() - start.to_double()) / step.to_double());
  STRATA_CHECK(count < 0x1p62, InvalidArgumentError, "arange: start {}, end {} and step {} give too many values",
               scalar_str(start), scalar_str(end), scalar_str(step));
  return static_cast<int64_t>(count);
}

}  // namespace

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  const DType dtype = options.dtype_;
  STRATA_CHECK(dtype != DType::Bool, DTypeError, "arange: dtype bool is not supported; use an integer or float dtype");
  const double first = start.to_double();
  const double last = end.to_double();
  const double delta = step.to_double();
  STRATA_CHECK(std::isfinite(first) && std::isfinite(last) && std::isfinite(delta), InvalidArgumentError,
               "arange: start, end and step must be finite, got {}, {} and {}", scalar_str(start), scalar_str(end),
               scalar_str(step));
  STRATA_CHECK(delta != 0, InvalidArgumentError, "arange: step must be non-zero (start {}, end {})", scalar_str(start),
               scalar_str(end));
  STRATA_CHECK(delta > 0 ? last >= first : last <= first, InvalidArgumentError,
               "arange: step {} points away from end: start {} cannot reach end {}", scalar_str(step),
               scalar_str(start), scalar_str(end));
  STRATA_CHECK(!is_integral(dtype) || (is_whole(start) && is_whole(end) && is_whole(step)), DTypeError,
               "arange: start {}, end {} and step {} are not all whole numbers, but dtype {} is integral; pass a "
               "floating dtype, e.g. arange({}, {}, {}, DType::F32)",
               scalar_str(start), scalar_str(end), scalar_str(step), dtype, scalar_str(start), scalar_str(end),
               scalar_str(step));
  const int64_t count = arange_count(start, end, step);
  if (is_integral(dtype) && count > 0) {
    const auto [min, max] = dtype == DType::U8    ? std::pair<double, double>{0, 255}
                            : dtype == DType::I32 ? std::pair<double, double>{-2147483648.0, 2147483647.0}
                                                  : std::pair<double, double>{-0x1p63, 0x1p63 - 1024};
    // (2^63 itself is no int64; 2^63 - 1024 is the largest double below it.)
    const double final_value = first + static_cast<double>(count - 1) * delta;
    STRATA_CHECK(first >= min && first <= max && final_value >= min && final_value <= max, InvalidArgumentError,
                 "arange: values from {} to {} do not fit dtype {}", scalar_str(start), final_value, dtype);
  }
  Tensor out = empty({count}, options);
  if (count > 0) arange_slot.get(out.device())(detail::op_call("arange", out.device()), out.view(), start, step);
  return out;
}

Tensor arange(const Scalar& end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  STRATA_CHECK(steps >= 0, InvalidArgumentError, "linspace: steps must be non-negative, got {}", steps);
  STRATA_CHECK(options.dtype_ != DType::Bool, DTypeError,
               "linspace: dtype bool is not supported; use an integer or float dtype");
  Tensor out = empty({steps}, options);
  if (steps > 0) linspace_slot.get(out.device())(detail::op_call("linspace", out.device()), out.view(), start, end);
  return out;
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  STRATA_CHECK(n >= 0, InvalidArgumentError, "eye: n must be non-negative, got {}", n);
  STRATA_CHECK(m >= -1, InvalidArgumentError, "eye: m must be non-negative (or -1 for m = n), got {}", m);
  if (m == -1) m = n;
  Tensor out = empty({n, m}, options);
  if (out.numel() > 0) eye_slot.get(out.device())(detail::op_call("eye", out.device()), out.view());
  return out;
}

}  // namespace strata
