// strata/strata.h alone is enough for a program: it compiles first in this file, before any other header, and what
// every layer declares is reachable through it, dist/ and data/distributed_sampler.h included.
#include <gtest/gtest.h>

#include <memory>

#include "strata/strata.h"

namespace strata {
namespace {

TEST(StrataHeader, DeclaresEveryLayerDistIncluded) {
  const Tensor t = ones({4});
  auto world = dist::make_local_group();
  ASSERT_NE(world, nullptr);
  EXPECT_EQ(world->size(), 1);
  Tensor sum = t.clone();
  world->all_reduce(sum, dist::ReduceOp::Sum)->wait();
  EXPECT_EQ(strata::sum(sum).item<float>(), 4.0f);
  const data::DistributedSampler sampler(10, 2, 1, /*shuffle=*/false);
  EXPECT_EQ(sampler.size(), 5);
  EXPECT_EQ(dist::local_device().is_cpu(), device_count(DeviceType::CUDA) + device_count(DeviceType::HIP) == 0);
}

}  // namespace
}  // namespace strata
