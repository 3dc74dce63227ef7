#include "strata/data/fashion_mnist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "data/idx_files.h"
#include "strata/core/error.h"

namespace strata {
namespace {

using data::FashionMnist;
using data::Split;
using testing::Bytes;
using testing::gzip;
using testing::idx_bytes;
using testing::TempDir;
using testing::write_file;

// A tiny split in `dir`: n images whose pixels are (i + y + x) % 256, labels i % 10.
void write_split(const TempDir& dir, const std::string& prefix, uint32_t n_images, uint32_t n_labels,
                 uint32_t height = 28, bool compress = true) {
  Bytes pixels(std::size_t{n_images} * height * 28);
  for (uint32_t i = 0; i < n_images; ++i) {
    for (uint32_t y = 0; y < height; ++y) {
      for (uint32_t x = 0; x < 28; ++x) pixels[(i * height + y) * 28 + x] = static_cast<unsigned char>(i + y + x);
    }
  }
  Bytes labels(n_labels);
  for (uint32_t i = 0; i < n_labels; ++i) labels[i] = static_cast<unsigned char>(i % 10);
  const Bytes images_file = idx_bytes({n_images, height, 28}, pixels);
  const Bytes labels_file = idx_bytes({n_labels}, labels, 0x08);
  if (compress) {
    write_file(dir / (prefix + "-images-idx3-ubyte.gz"), gzip(images_file));
    write_file(dir / (prefix + "-labels-idx1-ubyte.gz"), gzip(labels_file));
  } else {
    write_file(dir / (prefix + "-images-idx3-ubyte"), images_file);
    write_file(dir / (prefix + "-labels-idx1-ubyte"), labels_file);
  }
}

std::string load_error(const TempDir& dir, Split split) {
  try {
    FashionMnist ds(dir.path(), split);
  } catch (const IOError& e) {
    return e.what();
  }
  return "";
}

TEST(FashionMnist, LoadsImagesAsU8AndLabelsAsI64) {
  TempDir dir;
  write_split(dir, "train", 12, 12);
  const FashionMnist ds(dir.path(), Split::Train);
  EXPECT_EQ(ds.size(), 12);
  EXPECT_EQ(ds.images().dtype(), DType::U8);
  EXPECT_EQ(ds.images().shape(), (Shape{12, 28, 28}));
  EXPECT_EQ(ds.labels().dtype(), DType::I64);
  EXPECT_EQ(ds.labels().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1}));
  const data::Example e = ds.get(5);
  EXPECT_EQ(e.data.shape(), (Shape{28, 28}));
  EXPECT_EQ(e.data.to_vector<uint8_t>()[3 * 28 + 2], 5 + 3 + 2);
  EXPECT_EQ(e.target.item<int64_t>(), 5);
}

TEST(FashionMnist, TestSplitReadsT10kFilesAndPlainFilesWork) {
  TempDir dir;
  write_split(dir, "t10k", 3, 3, 28, /*compress=*/false);
  EXPECT_EQ(FashionMnist(dir.path(), Split::Test).size(), 3);
  EXPECT_NE(load_error(dir, Split::Train).find("train-images-idx3-ubyte.gz"), std::string::npos);
}

TEST(FashionMnist, DifferentImageAndLabelCountsNameBothFiles) {
  TempDir dir;
  write_split(dir, "train", 5, 4);
  const std::string message = load_error(dir, Split::Train);
  EXPECT_NE(message.find("train-images-idx3-ubyte.gz' holds 5 images"), std::string::npos) << message;
  EXPECT_NE(message.find("train-labels-idx1-ubyte.gz' holds 4 labels"), std::string::npos) << message;
}

TEST(FashionMnist, WrongImageSizeIsAnIOError) {
  TempDir dir;
  write_split(dir, "train", 2, 2, 27);
  const std::string message = load_error(dir, Split::Train);
  EXPECT_NE(message.find("[N, 28, 28], found shape [2, 27, 28]"), std::string::npos) << message;
}

TEST(FashionMnist, LabelOutOfRangeIsAnIOError) {
  TempDir dir;
  write_split(dir, "train", 2, 2);
  write_file(dir / "train-labels-idx1-ubyte.gz", gzip(idx_bytes({2}, {3, 12})));
  const std::string message = load_error(dir, Split::Train);
  EXPECT_NE(message.find("label 12 at position 1"), std::string::npos) << message;
}

TEST(FashionMnist, ALabelsFileWithTheHeaderOfImagesSaysItShouldHaveOneDimension) {
  TempDir dir;
  write_split(dir, "train", 2, 2);
  // The header of a [60000, 28, 28] images file, without the data: once reported as "truncated" for a made-up shape.
  write_file(dir / "train-labels-idx1-ubyte.gz", gzip(Bytes{0, 0, 8, 3, 0, 0, 0xEA, 0x60, 0, 0, 0, 28, 0, 0, 0, 28}));
  const std::string message = load_error(dir, Split::Train);
  EXPECT_NE(message.find("declares 3 dimensions, but a labels file has 1"), std::string::npos) << message;
  EXPECT_EQ(message.find("truncated"), std::string::npos) << message;
}

TEST(FashionMnist, ClassNames) {
  EXPECT_EQ(FashionMnist::class_name(0), "T-shirt/top");
  EXPECT_EQ(FashionMnist::class_name(9), "Ankle boot");
  EXPECT_THROW(FashionMnist::class_name(10), IndexError);
}

TEST(FashionMnist, RealTestSplit) {
  const std::filesystem::path dir(data::kFashionMnistDir);
  if (!std::filesystem::exists(dir / "t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir << " (Debian package dataset-fashion-mnist)";
  }
  const FashionMnist ds(dir, Split::Test);
  ASSERT_EQ(ds.size(), 10000);
  EXPECT_EQ(ds.images().shape(), (Shape{10000, 28, 28}));
  // The test split is balanced: 1000 images per class.
  std::vector<int64_t> counts(10, 0);
  for (int64_t label : ds.labels().to_vector<int64_t>()) ++counts.at(static_cast<std::size_t>(label));
  EXPECT_EQ(counts, std::vector<int64_t>(10, 1000));
  // Real images: dark background (0) with bright pixels somewhere.
  const std::vector<uint8_t> pixels = ds.images().to_vector<uint8_t>();
  EXPECT_EQ(*std::min_element(pixels.begin(), pixels.end()), 0);
  EXPECT_EQ(*std::max_element(pixels.begin(), pixels.end()), 255);
  const double mean = std::accumulate(pixels.begin(), pixels.end(), 0.0) / static_cast<double>(pixels.size());
  EXPECT_NEAR(mean / 255.0, 0.286, 0.01);  // the well-known Fashion-MNIST mean
}

}  // namespace
}  // namespace strata
