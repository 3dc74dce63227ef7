// Block kernels on the CPU (kernels/block_launch.h, Note [Block kernels]): shared memory, the block barrier, threads
// that leave early, errors; and the atomics of kernels/atomics.h hammered from many blocks at once.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata/kernels/launch.h"
#include "strata/runtime/parallel.h"

namespace strata {
namespace {

using kernels::Dim3;
using kernels::LaunchSite;

LaunchSite cpu_site(const char* kernel) { return LaunchSite(kCPU, nullptr, kernel, "test"); }

// The sum of each block's slice of `in`, by a tree in shared memory: every level ends at a barrier. Works for any
// block size: the tree starts at the power of two at or above it, and a thread adds only a partner that exists.
std::vector<int64_t> block_sums(const std::vector<int64_t>& values, std::uint32_t threads, bool dynamic) {
  const int64_t n = static_cast<int64_t>(values.size());
  const std::uint32_t blocks = static_cast<std::uint32_t>((n + threads - 1) / threads);
  std::vector<int64_t> sums(blocks, -1);
  const int64_t* in = values.data();
  int64_t* out = sums.data();
  std::uint32_t top = 1;
  while (top < threads) top *= 2;
  const std::size_t bytes = dynamic ? threads * sizeof(int64_t) : 0;
  kernels::launch_block(
      cpu_site("block_sum"), {blocks}, {threads}, bytes, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, int64_t[1024], fixed);
        int64_t* partial = dynamic ? ctx.dynamic_shared<int64_t>() : fixed;
        const std::uint32_t t = ctx.idx.thread.x;
        const int64_t i = ctx.idx.global_x();
        partial[t] = i < n ? in[i] : 0;
        STRATA_SYNCTHREADS();
        for (std::uint32_t stride = top / 2; stride > 0; stride /= 2) {
          if (t < stride && t + stride < threads) partial[t] += partial[t + stride];
          STRATA_SYNCTHREADS();
        }
        if (t == 0) out[ctx.idx.block.x] = partial[0];
      });
  return sums;
}

class BlockReduction : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(BlockReduction, EachBlockSumsItsSliceThroughSharedMemory) {
  const std::uint32_t threads = GetParam();
  // Many blocks, the last one partial; values that make any lost or doubled term show.
  const int64_t n = static_cast<int64_t>(threads) * 57 + threads / 3 + 1;
  std::vector<int64_t> values(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<std::size_t>(i)] = (i * 7919) % 1000 + (int64_t{1} << 20);
  for (bool dynamic : {false, true}) {
    const std::vector<int64_t> sums = block_sums(values, threads, dynamic);
    ASSERT_EQ(sums.size(), static_cast<std::size_t>((n + threads - 1) / threads));
    for (std::size_t b = 0; b < sums.size(); ++b) {
      const auto begin = values.begin() + static_cast<std::ptrdiff_t>(b * threads);
      const auto end = std::min(begin + threads, values.end());
      EXPECT_EQ(sums[b], std::accumulate(begin, end, int64_t{0})) << "block " << b << (dynamic ? " (dynamic)" : "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, BlockReduction,
                         ::testing::Values(1u, 2u, 7u, 32u, 100u, 255u, 256u, 1000u, 1024u));

TEST(BlockKernel, ThreadZeroReadsAfterTheBarrierWhatTheLastThreadWroteBeforeIt) {
  constexpr std::uint32_t kThreads = 200, kBlocks = 16;
  std::vector<int> seen(kBlocks * kThreads, -1);
  std::vector<int> counted(kBlocks * kThreads, -1);
  int* s = seen.data();
  int* c = counted.data();
  kernels::launch_block(
      cpu_site("meet"), {kBlocks}, {kThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, int[kThreads], slot);
        STRATA_SHARED(ctx, int, arrived);
        const std::uint32_t t = ctx.idx.thread.x;
        if (t == 0) arrived = 0;
        STRATA_SYNCTHREADS();
        slot[t] = static_cast<int>(ctx.idx.block.x * 1000 + t);
        ++arrived;  // the threads of a block take turns on the CPU: no race
        STRATA_SYNCTHREADS();
        // Each thread reads its successor's value (thread 0 reads nothing but the last thread's).
        s[ctx.idx.global_x()] = t == 0 ? slot[kThreads - 1] : slot[(t + 1) % kThreads];
        c[ctx.idx.global_x()] = arrived;
      });
  for (std::uint32_t b = 0; b < kBlocks; ++b) {
    EXPECT_EQ(seen[b * kThreads], static_cast<int>(b * 1000 + kThreads - 1)) << "block " << b;
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      EXPECT_EQ(counted[b * kThreads + t], static_cast<int>(kThreads)) << "block " << b << " thread " << t;
      if (t > 0) {
        EXPECT_EQ(seen[b * kThreads + t], static_cast<int>(b * 1000 + (t + 1) % kThreads));
      }
    }
  }
}

TEST(BlockKernel, TiledMatrixProductWithTwoSharedTiles) {
  constexpr std::uint32_t kTile = 16;
  const int64_t m = 37, k = 53, n = 29;  // no size a multiple of the tile
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  std::vector<float> c(static_cast<std::size_t>(m * n), -1.0f);
  // Small integers: every partial sum is exact in float, so the result must equal the plain product bit for bit.
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i * 31 % 17) - 8);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 13 % 11) - 5);
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  const Dim3 grid{static_cast<std::uint32_t>((n + kTile - 1) / kTile),
                  static_cast<std::uint32_t>((m + kTile - 1) / kTile)};
  kernels::launch_block(
      cpu_site("tiled_matmul"), grid, {kTile, kTile}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, float[kTile][kTile], tile_a);
        STRATA_SHARED(ctx, float[kTile][kTile], tile_b);
        const std::uint32_t tx = ctx.idx.thread.x, ty = ctx.idx.thread.y;
        const int64_t row = static_cast<int64_t>(ctx.idx.block.y) * kTile + ty;
        const int64_t col = static_cast<int64_t>(ctx.idx.block.x) * kTile + tx;
        float acc = 0;
        for (int64_t k0 = 0; k0 < k; k0 += kTile) {
          tile_a[ty][tx] = row < m && k0 + tx < k ? pa[row * k + k0 + tx] : 0.0f;
          tile_b[ty][tx] = k0 + ty < k && col < n ? pb[(k0 + ty) * n + col] : 0.0f;
          STRATA_SYNCTHREADS();
          for (std::uint32_t j = 0; j < kTile; ++j) acc += tile_a[ty][j] * tile_b[j][tx];
          STRATA_SYNCTHREADS();  // nobody overwrites a tile that others still read
        }
        if (row < m && col < n) pc[row * n + col] = acc;
      });
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float expected = 0;
      for (int64_t l = 0; l < k; ++l)
        expected += a[static_cast<std::size_t>(i * k + l)] * b[static_cast<std::size_t>(l * n + j)];
      ASSERT_EQ(c[static_cast<std::size_t>(i * n + j)], expected) << "c[" << i << "][" << j << "]";
    }
  }
}

TEST(BlockKernel, DynamicSharedMemoryHasTheSizeGivenAtLaunch) {
  // Each block reverses its slice through dynamic shared memory sized for `threads` doubles.
  for (std::uint32_t threads : {3u, 64u, 333u}) {
    const std::uint32_t blocks = 9;
    const std::size_t bytes = threads * sizeof(double);
    std::vector<double> data(blocks * threads);
    std::iota(data.begin(), data.end(), 0.5);
    std::vector<std::size_t> sizes(blocks, 0), misaligned(blocks, 1);
    double* d = data.data();
    std::size_t* size = sizes.data();
    std::size_t* off = misaligned.data();
    kernels::launch_block(
        cpu_site("reverse"), {blocks}, {threads}, bytes, STRATA_BLOCK_KERNEL(ctx) {
          double* buffer = ctx.dynamic_shared<double>();
          const std::uint32_t t = ctx.idx.thread.x;
          buffer[t] = d[ctx.idx.global_x()];
          STRATA_SYNCTHREADS();
          d[ctx.idx.global_x()] = buffer[ctx.idx.block_dim.x - 1 - t];
          if (t == 0) {
            size[ctx.idx.block.x] = ctx.dynamic_shared_bytes();
            off[ctx.idx.block.x] = reinterpret_cast<std::uintptr_t>(buffer) % 64;
          }
        });
    for (std::uint32_t b = 0; b < blocks; ++b) {
      EXPECT_EQ(sizes[b], bytes);
      EXPECT_EQ(misaligned[b], 0u);
      for (std::uint32_t t = 0; t < threads; ++t) {
        ASSERT_EQ(data[b * threads + t], static_cast<double>(b * threads + threads - 1 - t) + 0.5)
            << threads << " threads, block " << b << " thread " << t;
      }
    }
  }
  // None asked for: no buffer.
  bool null = false;
  bool* is_null = &null;
  kernels::launch_block(
      cpu_site("no_dynamic"), {1}, {1}, 0, STRATA_BLOCK_KERNEL(ctx) {
        *is_null = ctx.dynamic_shared<float>() == nullptr && ctx.dynamic_shared_bytes() == 0;
        STRATA_BLOCK_RETURN();
      });
  EXPECT_TRUE(null);
}

TEST(BlockKernel, SharedArraysAreOnePerBlockAndDistinct) {
  constexpr std::uint32_t kThreads = 24, kBlocks = 50;
  // Per thread: the addresses of its block's two arrays, as the thread saw them.
  std::vector<std::uintptr_t> first(kBlocks * kThreads), second(kBlocks * kThreads);
  std::vector<int> ok(kBlocks, 0);
  std::uintptr_t* f = first.data();
  std::uintptr_t* s = second.data();
  int* good = ok.data();
  kernels::launch_block(
      cpu_site("two_arrays"), {kBlocks}, {kThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, float[8], one);
        STRATA_SHARED(ctx, float[8], other);  // the same type: must not be the same array
        const std::uint32_t t = ctx.idx.thread.x;
        f[ctx.idx.global_x()] = reinterpret_cast<std::uintptr_t>(&one[0]);
        s[ctx.idx.global_x()] = reinterpret_cast<std::uintptr_t>(&other[0]);
        if (t < 8) one[t] = static_cast<float>(ctx.idx.block.x);
        if (t >= 8 && t < 16) other[t - 8] = -static_cast<float>(ctx.idx.block.x) - 1;
        STRATA_SYNCTHREADS();
        if (t == kThreads - 1) {
          int fine = 1;
          for (int j = 0; j < 8; ++j) {
            fine &=
                one[j] == static_cast<float>(ctx.idx.block.x) && other[j] == -static_cast<float>(ctx.idx.block.x) - 1;
          }
          good[ctx.idx.block.x] = fine;
        }
      });
  for (std::uint32_t b = 0; b < kBlocks; ++b) {
    EXPECT_EQ(ok[b], 1) << "block " << b;
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      EXPECT_EQ(first[b * kThreads + t], first[b * kThreads]) << "every thread sees the same array";
      EXPECT_EQ(second[b * kThreads + t], second[b * kThreads]);
    }
    EXPECT_GE(second[b * kThreads] - first[b * kThreads], 8 * sizeof(float)) << "the arrays overlap";
  }
}

TEST(BlockKernel, ThreeDimensionalBlocksAndGridsNumberThreadsAsCuda) {
  const Dim3 grid{3, 2, 2}, block{4, 3, 5};
  const int64_t threads = 4 * 3 * 5, total = 3 * 2 * 2 * threads;
  std::vector<int> hits(static_cast<std::size_t>(total), 0);
  std::vector<int> rank_ok(static_cast<std::size_t>(total), 0);
  int* h = hits.data();
  int* r = rank_ok.data();
  kernels::launch_block(
      cpu_site("dims"), grid, block, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, std::uint32_t[60], ranks);
        const kernels::ThreadIndex& i = ctx.idx;
        const int64_t b = i.block.x + static_cast<int64_t>(i.grid_dim.x) * (i.block.y + i.grid_dim.y * i.block.z);
        const std::uint32_t rank = ctx.thread_rank();
        ranks[rank] = rank;
        STRATA_SYNCTHREADS();
        const int64_t global = b * ctx.block_threads() + rank;
        h[global] += 1;
        r[global] = ranks[(rank + 1) % ctx.block_threads()] == (rank + 1) % ctx.block_threads() &&
                    rank == i.thread.x + 4 * (i.thread.y + 3 * i.thread.z);
      });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), total);
  EXPECT_EQ(std::count(rank_ok.begin(), rank_ok.end(), 1), total);
}

TEST(BlockKernel, ThreadsThatFinishEarlyNoLongerCountAtTheBarrier) {
  // Odd threads leave before any barrier, threads from 37 on after the first; the others go through five more,
  // checking at each that the values of the rest are there.
  constexpr std::uint32_t kThreads = 100, kBlocks = 12;
  std::vector<int> rounds(kBlocks * kThreads, -1);
  int* done = rounds.data();
  kernels::launch_block(
      cpu_site("early_exit"), {kBlocks}, {kThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, int[kThreads], value);
        const std::uint32_t t = ctx.idx.thread.x;
        const int64_t g = ctx.idx.global_x();
        value[t] = 0;
        if (t % 2 == 1) {
          done[g] = 0;
          STRATA_BLOCK_RETURN();
        }
        STRATA_SYNCTHREADS();
        if (t >= 37) {
          done[g] = 1;
          STRATA_BLOCK_RETURN();
        }
        int round = 1;
        for (; round <= 5; ++round) {
          value[t] = round;
          STRATA_SYNCTHREADS();
          // Every thread still running wrote this round's value before the barrier.
          for (std::uint32_t u = 0; u < 37; u += 2) {
            if (value[u] != round) {
              done[g] = -100 - round;
              STRATA_BLOCK_RETURN();
            }
          }
          STRATA_SYNCTHREADS();
        }
        done[g] = round;
      });
  for (std::uint32_t b = 0; b < kBlocks; ++b) {
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      const int expected = t % 2 == 1 ? 0 : t >= 37 ? 1 : 6;
      ASSERT_EQ(rounds[b * kThreads + t], expected) << "block " << b << " thread " << t;
    }
  }
}

TEST(BlockKernel, AnExceptionFromAThreadReachesTheCaller) {
  std::vector<int> after(64, 0);
  int* a = after.data();
  try {
    kernels::launch_block(
        cpu_site("throws"), {40}, {64}, 128, STRATA_BLOCK_KERNEL(ctx) {
          STRATA_SHARED(ctx, int[64], scratch);
          scratch[ctx.idx.thread.x] = 1;
          STRATA_SYNCTHREADS();
          if (ctx.idx.block.x == 17 && ctx.idx.thread.x == 5) {
            throw IndexError("thread 5 of block 17 found an index out of range");
          }
          STRATA_SYNCTHREADS();
          if (ctx.idx.block.x == 17) a[ctx.idx.thread.x] = 1;
        });
    FAIL() << "no error";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(), "thread 5 of block 17 found an index out of range");
  }
  EXPECT_EQ(std::count(after.begin(), after.end(), 1), 0) << "block 17 went on past the thread that threw";
  // The failed launch left nothing behind: the next one runs as usual.
  EXPECT_EQ(block_sums(std::vector<int64_t>(1000, 3), 128, false),
            std::vector<int64_t>({384, 384, 384, 384, 384, 384, 384, 312}));
}

TEST(BlockKernel, ABlockLaunchedFromABlockThreadLeavesTheOuterBlockAlone) {
  // The inner launch runs on the same CPU thread (nested regions run inline) and takes frames from the same arena;
  // the outer block's threads must find their frames and shared memory as they left them.
  std::vector<int64_t> outer_sums(6, -1), inner_sums(6, -1);
  int64_t* outer = outer_sums.data();
  int64_t* inner = inner_sums.data();
  kernels::launch_block(
      cpu_site("outer"), {6}, {50}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, int64_t[50], v);
        const std::uint32_t t = ctx.idx.thread.x;
        const int64_t mine = 1000 + t;  // lives in the frame across the inner launch
        v[t] = mine;
        STRATA_SYNCTHREADS();
        if (t == 3) inner[ctx.idx.block.x] = block_sums(std::vector<int64_t>(77, 2), 77, true)[0];
        STRATA_SYNCTHREADS();
        v[t] += mine;
        STRATA_SYNCTHREADS();
        if (t == 0) {
          int64_t s = 0;
          for (int u = 0; u < 50; ++u) s += v[u];
          outer[ctx.idx.block.x] = s;
        }
      });
  for (int b = 0; b < 6; ++b) {
    EXPECT_EQ(inner_sums[b], 154);
    EXPECT_EQ(outer_sums[b], 2 * (50 * 1000 + 49 * 50 / 2));
  }
}

TEST(BlockKernel, BadShapesAndTooMuchStaticSharedMemoryAreRefused) {
  const auto kernel = STRATA_BLOCK_KERNEL(ctx) {
    (void)ctx;
    STRATA_SYNCTHREADS();
  };
  for (Dim3 block : {Dim3{0}, Dim3{1025}, Dim3{32, 32, 2}}) {
    try {
      kernels::launch_block(cpu_site("shape"), {1}, block, 0, kernel);
      FAIL() << "no error for " << block.x << "x" << block.y << "x" << block.z;
    } catch (const InvalidArgumentError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("1 to 1024 threads"), std::string::npos) << message;
      EXPECT_NE(message.find("'shape'"), std::string::npos) << message;
    }
  }
  int runs = 0;
  int* r = &runs;
  kernels::launch_block(
      cpu_site("empty"), {0, 4}, {32}, 0, STRATA_BLOCK_KERNEL(ctx) {
        (void)ctx;
        ++*r;
        STRATA_BLOCK_RETURN();
      });
  EXPECT_EQ(runs, 0) << "an empty grid runs nothing";

  try {
    kernels::launch_block(
        cpu_site("big_static"), {2}, {4}, 0, STRATA_BLOCK_KERNEL(ctx) {
          STRATA_SHARED(ctx, float[8192], a);  // 32 KiB
          STRATA_SHARED(ctx, float[4096], b);  // 16 KiB more: 48 KiB, the limit, still fits
          STRATA_SHARED(ctx, float[1], c);     // past it
          a[0] = b[0] = c[0] = 0;
          STRATA_SYNCTHREADS();
        });
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'c' of 4 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("big_static"), std::string::npos) << message;
    EXPECT_NE(message.find("dynamic shared memory"), std::string::npos) << message;
  }
}

TEST(BlockKernel, OnAGpuFromAHostFileSaysHowToFixIt) {
  try {
    kernels::launch_block(
        LaunchSite(Device("cuda:0"), nullptr, "reduce", "test"), {1}, {32}, 0, STRATA_BLOCK_KERNEL(ctx) {
          (void)ctx;
          STRATA_SYNCTHREADS();
        });
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("compiled only for the host"), std::string::npos) << message;
    EXPECT_NE(message.find("block_kernel_test.cpp"), std::string::npos) << message;
  }
}

TEST(BlockKernel, RunBlockResumesEachThreadAfterEnteringIt) {
  // The run-time compiler's CPU dialect drives run_block itself, with `enter` setting the thread's index.
  thread_local std::int64_t current = -1;
  std::vector<std::int64_t> trace;
  auto make = [&](std::int64_t t) -> kernels::BlockThread {
    trace.push_back(t * 10 + (current == t ? 0 : 9));  // made after entering
    co_await kernels::BlockBarrier{};
    trace.push_back(100 + t * 10 + (current == t ? 0 : 9));
    if (t == 1) co_return;
    co_await kernels::BlockBarrier{};
    trace.push_back(200 + t * 10 + (current == t ? 0 : 9));
  };
  kernels::run_block(3, make, [](std::int64_t t) { current = t; });
  EXPECT_EQ(trace, std::vector<std::int64_t>({0, 10, 20, 100, 110, 120, 200, 220}));
}

// --- Atomics: each op on each dtype, from many blocks at once (Note [Atomic min and max of floating point]).

constexpr std::uint32_t kAtomicBlocks = 64, kAtomicThreads = 128;
constexpr int64_t kAtomicCount = int64_t{kAtomicBlocks} * kAtomicThreads;

template <typename T>
class Atomics : public ::testing::Test {};
using AtomicTypes = ::testing::Types<float, double, std::int32_t, std::int64_t>;
TYPED_TEST_SUITE(Atomics, AtomicTypes);

TYPED_TEST(Atomics, AddFromManyBlocksReturnsEachOldValueOnce) {
  using T = TypeParam;
  // Adding 1 kAtomicCount times is exact in every type, and the values returned must be 0, 1, ..., count - 1.
  T total = 0;
  std::vector<int> seen(kAtomicCount, 0);
  T* p = &total;
  int* s = seen.data();
  kernels::launch_block(
      cpu_site("atomic_add"), {kAtomicBlocks}, {kAtomicThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SYNCTHREADS();  // the threads of a block in turn between two barriers, the blocks in parallel
        const T old = kernels::atomic_add(p, T(1));
        kernels::atomic_add(&s[static_cast<int64_t>(old)], 1);
        (void)ctx;
      });
  EXPECT_EQ(total, static_cast<T>(kAtomicCount));
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kAtomicCount);

  // A sum with a known result that is not a count: (i % 64) / 4 for floats (every partial sum a multiple of 1/4
  // below 2^16, so exact in any order), i for ints.
  T sum = 0;
  p = &sum;
  kernels::launch_block(
      cpu_site("atomic_add_values"), {kAtomicBlocks}, {kAtomicThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        const int64_t i = ctx.idx.global_x();
        kernels::atomic_add(p, std::is_floating_point_v<T> ? static_cast<T>(i % 64) / 4 : static_cast<T>(i));
        STRATA_BLOCK_RETURN();
      });
  const double expected = std::is_floating_point_v<T> ? (kAtomicCount / 64) * (64.0 * 63 / 2) / 4
                                                      : static_cast<double>(kAtomicCount) * (kAtomicCount - 1) / 2;
  EXPECT_EQ(static_cast<double>(sum), expected);
}

TYPED_TEST(Atomics, MinAndMaxFromManyBlocks) {
  using T = TypeParam;
  // Values spread both sides of 0 in a scrambled order; the extremes are hit by one thread each.
  auto value_of = [](int64_t i) { return static_cast<T>(((i * 2654435761LL) % kAtomicCount) - kAtomicCount / 3); };
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::lowest();
  std::vector<T> old_lo(kAtomicCount), old_hi(kAtomicCount);
  T* pl = &lo;
  T* ph = &hi;
  T* ol = old_lo.data();
  T* oh = old_hi.data();
  kernels::launch_block(
      cpu_site("atomic_min_max"), {kAtomicBlocks}, {kAtomicThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        const int64_t i = ctx.idx.global_x();
        ol[i] = kernels::atomic_min(pl, value_of(i));
        STRATA_SYNCTHREADS();
        oh[i] = kernels::atomic_max(ph, value_of(i));
      });
  EXPECT_EQ(lo, static_cast<T>(-kAtomicCount / 3));
  EXPECT_EQ(hi, static_cast<T>(kAtomicCount - 1 - kAtomicCount / 3));
  // What each thread got back was the minimum (maximum) at some time: never past the final one, and the initial
  // value exactly once (the first to come).
  EXPECT_EQ(std::count(old_lo.begin(), old_lo.end(), std::numeric_limits<T>::max()), 1);
  EXPECT_EQ(std::count(old_hi.begin(), old_hi.end(), std::numeric_limits<T>::lowest()), 1);
  for (int64_t i = 0; i < kAtomicCount; ++i) {
    ASSERT_GE(old_lo[i], lo);
    ASSERT_LE(old_hi[i], hi);
  }
}

TYPED_TEST(Atomics, CompareAndSwapCountsAndReportsWhatItFound) {
  using T = TypeParam;
  // A counter incremented by compare-and-swap loops from every thread: exact in every type.
  T counter = 0;
  T* p = &counter;
  kernels::launch_block(
      cpu_site("atomic_cas"), {kAtomicBlocks}, {kAtomicThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        for (int round = 0; round < 3; ++round) {
          T seen = kernels::atomic_add(p, T(0));  // an atomic read
          for (;;) {
            const T found = kernels::atomic_cas(p, seen, static_cast<T>(seen + 1));
            if (found == seen) break;
            seen = found;
          }
          STRATA_SYNCTHREADS();
        }
        (void)ctx;
      });
  EXPECT_EQ(counter, static_cast<T>(3 * kAtomicCount));

  // One thread at a time: a swap that fails stores nothing and returns the value there.
  T x = 5;
  EXPECT_EQ(kernels::atomic_cas(&x, T(4), T(9)), T(5));
  EXPECT_EQ(x, T(5));
  EXPECT_EQ(kernels::atomic_cas(&x, T(5), T(9)), T(5));
  EXPECT_EQ(x, T(9));
}

TYPED_TEST(Atomics, OnSharedMemoryThenOncePerBlock) {
  using T = TypeParam;
  // The usual GPU pattern: the threads of a block combine into shared memory (a dependent type in STRATA_SHARED),
  // then one thread per block into global memory.
  T sum = 0, hi = std::numeric_limits<T>::lowest();
  T* ps = &sum;
  T* ph = &hi;
  kernels::launch_block(
      cpu_site("shared_atomics"), {kAtomicBlocks}, {kAtomicThreads}, 0, STRATA_BLOCK_KERNEL(ctx) {
        STRATA_SHARED(ctx, T[2], block);
        const std::uint32_t t = ctx.idx.thread.x;
        if (t == 0) {
          block[0] = 0;
          block[1] = std::numeric_limits<T>::lowest();
        }
        STRATA_SYNCTHREADS();
        kernels::atomic_add(&block[0], T(2));
        kernels::atomic_max(&block[1], static_cast<T>(ctx.idx.global_x()));
        STRATA_SYNCTHREADS();
        if (t == 0) {
          kernels::atomic_add(ps, block[0]);
          kernels::atomic_max(ph, block[1]);
        }
      });
  EXPECT_EQ(sum, static_cast<T>(2 * kAtomicCount));
  EXPECT_EQ(hi, static_cast<T>(kAtomicCount - 1));
}

TYPED_TEST(Atomics, MinAndMaxReturnThePreviousValue) {
  using T = TypeParam;
  T x = 10;
  EXPECT_EQ(kernels::atomic_min(&x, T(12)), T(10));
  EXPECT_EQ(x, T(10));
  EXPECT_EQ(kernels::atomic_min(&x, T(-3)), T(10));
  EXPECT_EQ(x, T(-3));
  EXPECT_EQ(kernels::atomic_max(&x, T(-7)), T(-3));
  EXPECT_EQ(x, T(-3));
  EXPECT_EQ(kernels::atomic_max(&x, T(8)), T(-3));
  EXPECT_EQ(x, T(8));
  EXPECT_EQ(kernels::atomic_add(&x, T(2)), T(8));
  EXPECT_EQ(x, T(10));
}

TEST(AtomicsOfFloats, ANaNWinsAndSignedZerosCompareEqual) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float x = 1.0f;
  EXPECT_EQ(kernels::atomic_max(&x, nan), 1.0f);
  EXPECT_TRUE(std::isnan(x)) << "a NaN replaces a number";
  kernels::atomic_max(&x, 5.0f);
  kernels::atomic_min(&x, -5.0f);
  EXPECT_TRUE(std::isnan(x)) << "nothing replaces a NaN";
  double d = 2.0;
  kernels::atomic_min(&d, std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isnan(d));

  float z = 0.0f;
  kernels::atomic_min(&z, -0.0f);
  EXPECT_FALSE(std::signbit(z)) << "-0.0 is not below 0.0";
  // atomic_cas compares bits: -0.0 does not match 0.0, a NaN matches itself.
  EXPECT_FALSE(std::signbit(kernels::atomic_cas(&z, -0.0f, 7.0f)));
  EXPECT_EQ(z, 0.0f);
  float n = nan;
  EXPECT_TRUE(std::isnan(kernels::atomic_cas(&n, nan, 3.0f)));
  EXPECT_EQ(n, 3.0f);
}

}  // namespace
}  // namespace strata
