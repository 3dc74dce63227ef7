#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "strata/core/device.h"
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

}  // namespace strata::testing
