// cuda::DeviceGuard against a stand-in CUDA backend whose set_current_device fails on demand, as the plugin's does
// after a sticky CUDA error, which a test cannot provoke on a real GPU without spoiling the process for the others.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "strata/core/error.h"
#include "strata/runtime/cuda.h"
#include "strata/runtime/registry.h"

namespace strata {
namespace {

// What the stand-in was asked, shared with the test (the registry owns the backend).
struct SelectionLog {
  int current = 0;
  bool failing = false;  // set_current_device throws, as after a sticky error
  std::vector<int> selected;
};

// Two devices and a current one; nothing else is used by DeviceGuard.
class StandInCudaBackend final : public Backend {
 public:
  explicit StandInCudaBackend(std::shared_ptr<SelectionLog> log) : log_(std::move(log)) {}

  DeviceType type() const override { return DeviceType::CUDA; }
  int device_count() const override { return 2; }
  int current_device() const override { return log_->current; }
  void set_current_device(int index) override {
    log_->selected.push_back(index);
    STRATA_CHECK(!log_->failing, BackendError,
                 "set_current_device to cuda:{} failed: cudaErrorIllegalAddress (an illegal memory access was "
                 "encountered) from cudaSetDevice(index)",
                 index);
    log_->current = index;
  }

  // The rest of what every backend must provide; the optional capabilities keep their throwing defaults.
  DeviceProperties properties(int) const override { unused(); }
  MemoryInfo memory_info(int) const override { unused(); }
  void* raw_allocate(int, std::size_t) override { unused(); }
  void raw_free(int, void*, std::size_t) override { unused(); }
  void copy(void*, Device, const void*, Device, std::size_t, NativeStream, bool) override { unused(); }
  void synchronize_device(int) override { unused(); }

 private:
  [[noreturn]] static void unused() {
    STRATA_THROW(NotImplementedError, "the stand-in CUDA backend only has a current device");
  }
  std::shared_ptr<SelectionLog> log_;
};

// Registering replaces the process's CUDA backend, so the stand-in is used only where there is none; afterwards
// CUDA is unavailable again.
class DeviceGuardOnAStandInBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::is_available()) GTEST_SKIP() << "the plugin's backend is loaded, and a stand-in may not replace it";
    register_backend(DeviceType::CUDA, std::make_unique<StandInCudaBackend>(log_));
    registered_ = true;
  }
  void TearDown() override {
    if (registered_) register_backend(DeviceType::CUDA, nullptr);
  }

  std::shared_ptr<SelectionLog> log_ = std::make_shared<SelectionLog>();
  bool registered_ = false;
};

TEST_F(DeviceGuardOnAStandInBackend, SelectsTheDeviceAndRestoresThePreviousOne) {
  {
    const cuda::DeviceGuard guard(1);
    EXPECT_EQ(cuda::current_device(), 1);
  }
  EXPECT_EQ(cuda::current_device(), 0);
  EXPECT_EQ(log_->selected, (std::vector<int>{1, 0}));
}

// A throwing destructor would end the process here (std::terminate), failing the test.
TEST_F(DeviceGuardOnAStandInBackend, RestoringAfterAStickyErrorDoesNotThrow) {
  {
    const cuda::DeviceGuard guard(1);
    log_->failing = true;
  }
  EXPECT_EQ(log_->selected, (std::vector<int>{1, 0})) << "the guard did not try to restore cuda:0";
  EXPECT_EQ(cuda::current_device(), 1);
  EXPECT_THROW(cuda::set_device(0), BackendError) << "the next checked call must still report the error";
}

}  // namespace
}  // namespace strata
