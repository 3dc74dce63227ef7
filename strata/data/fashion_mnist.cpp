#include "strata/data/fashion_mnist.h"


#include <string>

#include "strata/core/error.h"
#include "strata/data/idx_detail.h"
#include "strata/tensor/factories.h"

namespace strata::data {

namespace {

// The .gz file when it exists, else the uncompressed one; the .gz name for the error when neither does.
std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& stem) {
  const std::filesystem::path gz = dir / (stem + ".gz");
  const std::filesystem::path plain = dir / stem;
  std::error_code ec;
  if (!std::filesystem::exists(gz, ec) && std::filesystem::exists(plain, ec)) return plain;
  return gz;
}

Tensor read_images(const std::filesystem::path& path) {
  Tensor images = detail::read_idx_of_rank(path, 3, "an images file");
  const Shape& s = images.shape();
  STRATA_CHECK(s.size() == 3 && s[1] == FashionMnist::kImageSize && s[2] == FashionMnist::kImageSize, IOError,
               "FashionMnist: '{}' should hold images of shape [N, 28, 28], found shape {}", path.string(), s);
  return images;
}

Tensor read_labels(const std::filesystem::path& path) {
  const Tensor raw = detail::read_idx_of_rank(path, 1, "a labels file");
  STRATA_CHECK(raw.dim() == 1, IOError, "FashionMnist: '{}' should hold labels of shape [N], found shape {}",
               path.string(), raw.shape());
  Tensor labels = empty(raw.shape(), DType::I64);
  const auto* in = raw.data<uint8_t>();
  auto* out = labels.data<int64_t>();
  for (int64_t i = 0; i < raw.numel(); ++i) {
    STRATA_CHECK(in[i] < FashionMnist::kNumClasses, IOError,
                 "FashionMnist: '{}' holds label {} at position {}; expected a class in [0, {})", path.string(),
                 int{in[i]}, i, FashionMnist::kNumClasses);
    out[i] = in[i];
  }
  return labels;
}

Example read_split(const std::filesystem::path& dir, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const auto images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const auto labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  Tensor images = read_images(images_path);
  Tensor labels = read_labels(labels_path);
  STRATA_CHECK(images.size(0) == labels.size(0), IOError,
               "FashionMnist: '{}' holds {} images but '{}' holds {} labels; expected the same count",
               images_path.string(), images.size(0), labels_path.string(), labels.size(0));
  return {std::move(images), std::move(labels)};
}

}  // namespace

FashionMnist::FashionMnist(const std::filesystem::path& dir, Split split) : FashionMnist(read_split(dir, split)) {}

std::string_view FashionMnist::class_name(int64_t label) {
  STRATA_CHECK(label >= 0 && label < kNumClasses, IndexError, "FashionMnist::class_name: label {} is not in [0, {})",
               label, kNumClasses);
  return kClassNames[static_cast<std::size_t>(label)];
}

}  // namespace strata::data
