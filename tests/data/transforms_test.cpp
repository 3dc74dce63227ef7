#include "strata/data/transforms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "strata/core/error.h"
#include "strata/tensor/factories.h"

namespace strata {
namespace {

using data::Normalize;
using data::RandomCrop;
using data::RandomHorizontalFlip;

// A batch [n, c, h, w] (or [n, h, w] when c == 0) holding 1, 2, 3, ...
Tensor counting_batch(int64_t n, int64_t c, int64_t h, int64_t w) {
  const Shape shape = c == 0 ? Shape{n, h, w} : Shape{n, c, h, w};
  std::vector<float> values(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i + 1);
  return tensor<float>(values, shape);
}

TEST(Transforms, NormalizePerChannel) {
  Tensor batch = tensor<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 1, 2});  // n=2, c=2, 1x2 images
  const Tensor out = Normalize({1.0f, 2.0f}, {2.0f, 4.0f})(batch);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{0, 0.5, 0.25, 0.5, 2, 2.5, 1.25, 1.5}));
  EXPECT_TRUE(out.shares_storage(batch)) << "Normalize works in place on the loader's batch";
}

TEST(Transforms, NormalizeWithOneValueAppliesToEveryChannelAnd3DBatches) {
  const Tensor out = Normalize({0.5f}, {0.5f})(tensor<float>({0, 0.5, 1, 0.25}, {1, 2, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{-1, 0, 1, -0.5}));
}

TEST(Transforms, NormalizeRejectsBadArguments) {
  EXPECT_THROW(Normalize({0.5f, 0.5f}, {1.0f}), InvalidArgumentError);
  EXPECT_THROW(Normalize({0.5f}, {0.0f}), InvalidArgumentError);
  EXPECT_THROW(Normalize({0.1f, 0.2f}, {1.0f, 1.0f})(counting_batch(1, 3, 2, 2)), ShapeError);
  EXPECT_THROW(Normalize({0.1f}, {1.0f})(zeros({2, 2, 2}, DType::F64)), DTypeError);
  EXPECT_THROW(Normalize({0.1f}, {1.0f})(zeros({2, 2})), ShapeError);
}

TEST(Transforms, FlipWithPOneMirrorsEveryRow) {
  const Tensor out = RandomHorizontalFlip(1.0)(counting_batch(2, 1, 2, 3));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}));
}

TEST(Transforms, FlipWithPZeroChangesNothing) {
  const Tensor out = RandomHorizontalFlip(0.0)(counting_batch(4, 0, 3, 3));
  EXPECT_EQ(out.to_vector<float>(), counting_batch(4, 0, 3, 3).to_vector<float>());
}

TEST(Transforms, FlipFlipsWholeImagesAboutHalfTheTimeReproducibly) {
  const int64_t n = 400, c = 2, h = 2, w = 3;
  const std::vector<float> before = counting_batch(n, c, h, w).to_vector<float>();
  const std::vector<float> after = RandomHorizontalFlip(0.5, 7)(counting_batch(n, c, h, w)).to_vector<float>();
  int flipped = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto image = static_cast<std::size_t>(i * c * h * w);
    const bool same = std::equal(before.begin() + image, before.begin() + image + c * h * w, after.begin() + image);
    if (!same) {
      ++flipped;
      for (int64_t r = 0; r < c * h; ++r) {  // every row of every channel mirrored
        for (int64_t x = 0; x < w; ++x) {
          EXPECT_EQ(after[image + r * w + x], before[image + r * w + (w - 1 - x)]);
        }
      }
    }
  }
  EXPECT_GT(flipped, 150);
  EXPECT_LT(flipped, 250);
  EXPECT_EQ(RandomHorizontalFlip(0.5, 7)(counting_batch(n, c, h, w)).to_vector<float>(), after);
  EXPECT_NE(RandomHorizontalFlip(0.5, 8)(counting_batch(n, c, h, w)).to_vector<float>(), after);
}

TEST(Transforms, CropWithoutPaddingOfFullSizeIsIdentity) {
  const Tensor out = RandomCrop(4)(counting_batch(3, 2, 4, 4));
  EXPECT_EQ(out.to_vector<float>(), counting_batch(3, 2, 4, 4).to_vector<float>());
}

TEST(Transforms, CropIsAWindowOfTheZeroPaddedImage) {
  const int64_t n = 64, c = 2, h = 5, w = 6, size = 5, pad = 2;
  const std::vector<float> in = counting_batch(n, c, h, w).to_vector<float>();
  const Tensor out_t = RandomCrop(size, pad, 3)(counting_batch(n, c, h, w));
  ASSERT_EQ(out_t.shape(), (Shape{n, c, size, size}));
  const std::vector<float> out = out_t.to_vector<float>();
  auto padded = [&](int64_t i, int64_t ch, int64_t y, int64_t x) {
    y -= pad;
    x -= pad;
    if (y < 0 || y >= h || x < 0 || x >= w) return 0.0f;
    return in[static_cast<std::size_t>(((i * c + ch) * h + y) * w + x)];
  };
  std::set<std::pair<int64_t, int64_t>> origins;
  for (int64_t i = 0; i < n; ++i) {
    // Find the window origin that reproduces channel 0; every channel must use the same one.
    int matches = 0;
    for (int64_t top = 0; top <= h + 2 * pad - size; ++top) {
      for (int64_t left = 0; left <= w + 2 * pad - size; ++left) {
        bool all = true;
        for (int64_t ch = 0; ch < c && all; ++ch) {
          for (int64_t y = 0; y < size && all; ++y) {
            for (int64_t x = 0; x < size && all; ++x) {
              all = out[static_cast<std::size_t>(((i * c + ch) * size + y) * size + x)] ==
                    padded(i, ch, top + y, left + x);
            }
          }
        }
        if (all) {
          ++matches;
          origins.emplace(top, left);
        }
      }
    }
    EXPECT_EQ(matches, 1) << "sample " << i;
  }
  EXPECT_GT(origins.size(), 15u) << "crops should land at many places";  // 5 x 6 possible origins
}

TEST(Transforms, CropOf3DBatchAndErrors) {
  EXPECT_EQ(RandomCrop(2, 1, 0)(counting_batch(3, 0, 4, 4)).shape(), (Shape{3, 2, 2}));
  EXPECT_THROW(RandomCrop(7, 1)(counting_batch(1, 0, 4, 4)), ShapeError);
  EXPECT_THROW(RandomCrop(0), InvalidArgumentError);
  EXPECT_THROW(RandomCrop(2, -1), InvalidArgumentError);
}

TEST(Transforms, ComposeAppliesInOrder) {
  data::Compose both({Normalize({1.0f}, {2.0f}), RandomHorizontalFlip(1.0)});
  EXPECT_EQ(both(tensor<float>({1, 3, 5}, {1, 1, 3})).to_vector<float>(), (std::vector<float>{2, 1, 0}));
}

}  // namespace
}  // namespace strata
