// Batch transforms on host memory (see Note [Batch transforms]).
#include "strata/data/transforms.h"

#include <algorithm>
#include <cstring>

#include "strata/core/error.h"
#include "strata/data/sampling.h"
#include "strata/tensor/factories.h"

namespace strata::data {

namespace {

// Generator streams of the random transforms, apart from the loader's epoch streams (small numbers).
constexpr uint64_t kFlipStream = 0x8000'0000'666c'6970ULL;  // "flip"
constexpr uint64_t kCropStream = 0x8000'0000'6372'6f70ULL;  // "crop"

// A batch seen as N images of C planes of H x W floats.
struct Layout {
  int64_t n, c, h, w;
  int64_t plane() const { return h * w; }
  int64_t image() const { return c * h * w; }
};

Layout check_batch(const char* op, const Tensor& batch) {
  STRATA_CHECK(batch.defined(), InvalidArgumentError, "{}: the batch is undefined", op);
  STRATA_CHECK(batch.device().is_cpu(), InvalidArgumentError,
               "{}: transforms run on host batches, but this batch is on {}", op, batch.device());
  STRATA_CHECK(batch.dtype() == DType::F32, DTypeError, "{}: expected an f32 batch, got {}", op, batch.dtype());
  STRATA_CHECK(batch.dim() == 3 || batch.dim() == 4, ShapeError,
               "{}: expected a batch shaped [N, C, H, W] or [N, H, W], got shape {}", op, batch.shape());
  STRATA_CHECK(batch.is_contiguous(), InvalidArgumentError, "{}: the batch must be contiguous", op);
  const Shape& s = batch.shape();
  if (batch.dim() == 3) return {s[0], 1, s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

}  // namespace

Tensor Compose::operator()(Tensor batch) {
  for (Transform& t : transforms_) batch = t(std::move(batch));
  return batch;
}

Normalize::Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)), std_(std::move(std)) {
  STRATA_CHECK(!mean_.empty() && mean_.size() == std_.size(), InvalidArgumentError,
               "Normalize: mean and std need the same, non-zero number of values, got {} and {}", mean_.size(),
               std_.size());
  for (std::size_t i = 0; i < std_.size(); ++i) {
    STRATA_CHECK(std_[i] != 0.0f, InvalidArgumentError, "Normalize: std[{}] is zero", i);
  }
}

Tensor Normalize::operator()(Tensor batch) const {
  const Layout l = check_batch("Normalize", batch);
  STRATA_CHECK(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == l.c, ShapeError,
               "Normalize: {} mean/std values for a batch with {} channels (shape {})", mean_.size(), l.c,
               batch.shape());
  float* x = batch.data<float>();
  for (int64_t i = 0; i < l.n; ++i) {
    for (int64_t c = 0; c < l.c; ++c) {
      const std::size_t k = mean_.size() == 1 ? 0 : static_cast<std::size_t>(c);
      const float m = mean_[k];
      const float inv = 1.0f / std_[k];
      float* p = x + i * l.image() + c * l.plane();
      for (int64_t j = 0; j < l.plane(); ++j) p[j] = (p[j] - m) * inv;
    }
  }
  return batch;
}

RandomHorizontalFlip::RandomHorizontalFlip(double p, uint64_t seed) : p_(p), rng_(make_generator(seed, kFlipStream)) {
  STRATA_CHECK(p >= 0.0 && p <= 1.0, InvalidArgumentError, "RandomHorizontalFlip: p must be in [0, 1], got {}", p);
}

Tensor RandomHorizontalFlip::operator()(Tensor batch) {
  const Layout l = check_batch("RandomHorizontalFlip", batch);
  float* x = batch.data<float>();
  for (int64_t i = 0; i < l.n; ++i) {
    // Always draw, so that the sequence of decisions does not depend on p.
    if (!(uniform_unit(rng_) < p_)) continue;
    for (int64_t r = 0; r < l.c * l.h; ++r) {
      float* row = x + i * l.image() + r * l.w;
      std::reverse(row, row + l.w);
    }
  }
  return batch;
}

RandomCrop::RandomCrop(int64_t size, int64_t padding, uint64_t seed)
    : size_(size), padding_(padding), rng_(make_generator(seed, kCropStream)) {
  STRATA_CHECK(size > 0, InvalidArgumentError, "RandomCrop: size must be positive, got {}", size);
  STRATA_CHECK(padding >= 0, InvalidArgumentError, "RandomCrop: padding must be non-negative, got {}", padding);
}

Tensor RandomCrop::operator()(Tensor batch) {
  const Layout l = check_batch("RandomCrop", batch);
  const int64_t padded_h = l.h + 2 * padding_;
  const int64_t padded_w = l.w + 2 * padding_;
  STRATA_CHECK(size_ <= padded_h && size_ <= padded_w, ShapeError,
               "RandomCrop: a {}x{} crop does not fit images of {}x{} padded by {} (shape {})", size_, size_, l.h, l.w,
               padding_, batch.shape());
  Shape shape = batch.shape();
  shape[shape.size() - 2] = size_;
  shape[shape.size() - 1] = size_;
  Tensor out = empty(shape, TensorOptions(DType::F32).pinned(batch.is_pinned()));
  const float* in = batch.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < l.n; ++i) {
    // Window origin in the unpadded image's coordinates: it may start up to `padding_` outside.
    const int64_t top =
        static_cast<int64_t>(uniform_below(rng_, static_cast<uint64_t>(padded_h - size_ + 1))) - padding_;
    const int64_t left =
        static_cast<int64_t>(uniform_below(rng_, static_cast<uint64_t>(padded_w - size_ + 1))) - padding_;
    // Columns of the window that fall inside the image: [x0, x1).
    const int64_t x0 = std::clamp<int64_t>(-left, 0, size_);
    const int64_t x1 = std::clamp<int64_t>(l.w - left, 0, size_);
    for (int64_t c = 0; c < l.c; ++c) {
      const float* src = in + i * l.image() + c * l.plane();
      float* dst = o + (i * l.c + c) * size_ * size_;
      for (int64_t y = 0; y < size_; ++y) {
        float* row = dst + y * size_;
        const int64_t sy = y + top;
        if (sy < 0 || sy >= l.h || x0 >= x1) {
          std::fill(row, row + size_, 0.0f);
          continue;
        }
        std::fill(row, row + x0, 0.0f);
        std::memcpy(row + x0, src + sy * l.w + x0 + left, static_cast<std::size_t>(x1 - x0) * sizeof(float));
        std::fill(row + x1, row + size_, 0.0f);
      }
    }
  }
  return out;
}

}  // namespace strata::data
