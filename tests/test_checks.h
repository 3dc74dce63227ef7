#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/autograd/gradcheck.h"
#include "strata/core/device.h"
#include "strata/core/error.h"
#include "strata/runtime/stream.h"
#include "strata/tensor/factories.h"

namespace strata::testing {

/// Runs `op`, waits for `device`, and returns the message of the DeviceAssertError that surfaced ("" if none).
template <typename Op>
std::string device_assert_message(Device device, Op&& op) {
  try {
    op();
    synchronize(device);
  } catch (const DeviceAssertError& e) {
    return e.what();
  }
  return "";
}

/// Expects `f`'s gradients at `inputs` (f64) to match finite differences (autograd::gradcheck); the failure message
/// starts with `label` when one is given.
inline void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             const std::vector<Tensor>& inputs, std::string_view label = {}) {
  // gradcheck builds its projection vector with tensor<double>(v, out.shape()), which reads an empty shape as
  // "1-D": 0-d results are checked as shape [1].
  const autograd::GradcheckResult r = autograd::gradcheck(
      [&f](const std::vector<Tensor>& x) {
        const Tensor out = f(x);
        return out.dim() == 0 ? out.reshape({1}) : out;
      },
      inputs);
  EXPECT_TRUE(r.ok) << label << (label.empty() ? "" : ": ") << r.report;
}

/// Expects `actual` to match `expected` element by element within `tol`.
inline void expect_near(const std::vector<float>& actual, const std::vector<double>& expected, double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

/// Runs `f`, expects ErrorType, and checks that its message contains every one of `parts`.
template <typename ErrorType, typename Fn>
void expect_error(Fn f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "no error; expected one mentioning " << parts.front();
  } catch (const ErrorType& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

/// `n` values in [-1, 1) from a fixed LCG: the same inputs on every device and in every run.
inline std::vector<double> deterministic_values(int64_t n, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53) * 2.0 - 1.0;
  }
  return v;
}

/// A `dtype` tensor of `shape` on `device` holding deterministic_values(numel, seed); an empty shape gives a 0-d
/// tensor.
inline Tensor deterministic_tensor(const Shape& shape, DType dtype, Device device, std::uint64_t seed) {
  const Tensor t =
      tensor<double>(deterministic_values(numel(shape), seed), shape.empty() ? Shape{1} : shape, device).to(dtype);
  return shape.empty() ? Tensor(t.storage(), dtype, {}, {}, 0) : t;  // tensor() makes an empty shape 1-D
}

}  // namespace strata::testing
