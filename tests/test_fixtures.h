#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "strata/core/device.h"
#include "strata/runtime/parallel.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/random.h"
#include "test_checks.h"

namespace strata::testing {

/// A test run on every available device (parametrised by it), with that device's default generator seeded (42)
/// before each test.
class SeededDeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { default_generator(device()).manual_seed(42); }

  /// The device this instance of the test runs on.
  Device device() const { return GetParam(); }
  /// f32 on the test's device.
  TensorOptions f32() const { return TensorOptions(DType::F32).device(device()); }
  /// A standard-normal f64 leaf on the test's device that requires grad.
  Tensor leaf(const Shape& shape) const {
    Tensor t = randn(shape, TensorOptions(DType::F64).device(device()));
    t.requires_grad_();
    return t;
  }
  /// Runs an op whose kernel should fail, and returns the message of its device-side assert ("" if none).
  template <typename Op>
  std::string assert_message(Op&& op) const {
    return device_assert_message(device(), std::forward<Op>(op));
  }
};

/// Sets the CPU pool's size for a test, and restores it when the test ends. The thread budget is held at the whole
/// pool meanwhile, so that what a test asks of the pool does not follow the machine's load (Note [Fewer threads
/// while other processes hold the cores]).
class PoolSize {
 public:
  explicit PoolSize(int n) : previous_(num_threads()) {
    set_num_threads(n);
    detail::pin_thread_budget(n);
  }
  ~PoolSize() {
    detail::pin_thread_budget(0);
    set_num_threads(previous_);
  }
  PoolSize(const PoolSize&) = delete;
  PoolSize& operator=(const PoolSize&) = delete;

 private:
  int previous_;
};

}  // namespace strata::testing
