#pragma once

#include <array>
#include <filesystem>
#include <string_view>

#include "strata/data/dataset.h"
#include "strata/data/idx.h"

namespace strata::data {

/// Fashion-MNIST (Zalando): 28x28 grey images of clothing in 10 classes, 60000 for training and 10000 for testing.
/// Images are u8 [N, 28, 28], labels i64 [N] in [0, 10), both in host memory.
class FashionMnist : public TensorDataset {
 public:
  static constexpr int64_t kImageSize = 28;
  static constexpr int64_t kNumClasses = 10;
  static constexpr std::array<std::string_view, kNumClasses> kClassNames = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

  /// Reads `{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz` (or the same names without .gz) from `dir`. Throws
  /// IOError naming the file when one is missing or malformed, or when images and labels disagree.
  explicit FashionMnist(const std::filesystem::path& dir = kFashionMnistDir, Split split = Split::Train);

  const Tensor& images() const { return data(); }
  const Tensor& labels() const { return target(); }
  /// "T-shirt/top" for 0, ... "Ankle boot" for 9.
  static std::string_view class_name(int64_t label);

 private:
  explicit FashionMnist(Example split) : TensorDataset(std::move(split.data), std::move(split.target)) {}
};

}  // namespace strata::data
