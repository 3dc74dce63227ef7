#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace strata {

/// A vector that keeps up to N elements inline; shapes and strides rarely exceed a handful of dimensions.
template <typename T, int N>
class SmallVector {
 public:
  SmallVector() = default;
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  explicit SmallVector(std::size_t count, T value = T{}) {
    reserve(count);
    std::fill_n(data_, count, value);
    size_ = count;
  }
  template <typename It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT
  SmallVector(const SmallVector& other) { *this = other; }
  SmallVector& operator=(const SmallVector& other) {
    if (this == &other) return *this;
    if (other.size_ <= N) {
      copy_inline(other);
    } else {
      assign(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector(SmallVector&& other) noexcept { *this = std::move(other); }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this == &other) return *this;
    if (other.heap_) {
      heap_ = std::move(other.heap_);
      data_ = heap_.get();
      capacity_ = other.capacity_;
      size_ = other.size_;
    } else {
      copy_inline(other);
    }
    other.data_ = other.inline_;
    other.capacity_ = N;
    other.size_ = 0;
    return *this;
  }

  template <typename It>
  void assign(It first, It last) {
    const auto count = static_cast<std::size_t>(std::distance(first, last));
    size_ = 0;
    reserve(count);
    std::copy(first, last, data_);
    size_ = count;
  }

  void reserve(std::size_t count) {
    if (count <= capacity_) return;
    auto grown = std::make_unique<T[]>(count);
    std::copy(data_, data_ + size_, grown.get());
    heap_ = std::move(grown);
    data_ = heap_.get();
    capacity_ = count;
  }
  void push_back(T value) {
    if (size_ == capacity_) reserve(capacity_ * 2);
    data_[size_++] = value;
  }
  void insert(std::size_t pos, T value) {
    push_back(value);
    std::rotate(data_ + pos, data_ + size_ - 1, data_ + size_);
  }
  void erase(std::size_t pos) {
    std::copy(data_ + pos + 1, data_ + size_, data_ + pos);
    --size_;
  }
  void resize(std::size_t count, T value = T{}) {
    reserve(count);
    if (count > size_) std::fill(data_ + size_, data_ + count, value);
    size_ = count;
  }
  void pop_back() { --size_; }

  std::size_t size() const { return size_; }
  int64_t ssize() const { return static_cast<int64_t>(size_); }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    if (a.size_ != b.size_) return false;
    // A plain loop: std::equal becomes a call to memcmp, which costs more than comparing a few dimensions.
    for (std::size_t i = 0; i < a.size_; ++i) {
      if (a.data_[i] != b.data_[i]) return false;
    }
    return true;
  }

 private:
  // Copies a vector of at most N elements into inline storage. Shapes are copied on every op, so this copies all N
  // slots with one fixed-size memcpy, which the compiler turns into a few moves, rather than size_ of them through
  // a call to memmove. Reading past other's size is fine: inline storage has N initialised slots, and a heap buffer
  // is only ever made bigger than N, with every slot initialised.
  void copy_inline(const SmallVector& other) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(inline_, other.data_, sizeof inline_);
    heap_.reset();
    data_ = inline_;
    capacity_ = N;
    size_ = other.size_;
  }

  T inline_[N] = {};
  std::unique_ptr<T[]> heap_;
  T* data_ = inline_;
  std::size_t size_ = 0;
  std::size_t capacity_ = N;
};

using Shape = SmallVector<int64_t, 6>;
using Strides = SmallVector<int64_t, 6>;

/// Number of elements of a shape (1 for a scalar's empty shape).
inline int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// Row-major strides, in elements.
inline Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size(), 1);
  int64_t step = 1;
  for (auto i = shape.ssize() - 1; i >= 0; --i) {
    strides[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

/// The number of elements a contiguous tensor of `shape` spans, each dimension counted as at least 1 (as
/// contiguous_strides steps over it), times `element_bytes`: the bytes its storage needs when no dimension is 0, and
/// what its largest stride reaches in any case. Empty when that does not fit in int64, so that neither the tensor's
/// strides nor its byte count can overflow. Dimensions must be non-negative.
inline std::optional<int64_t> checked_span(const Shape& shape, int64_t element_bytes = 1) {
  int64_t span = element_bytes;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(span, std::max<int64_t>(d, 1), &span)) return std::nullopt;
  }
  return span;
}

/// "[2, 3]" — for error messages.
inline std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace strata

template <>
struct fmt::formatter<strata::Shape> : fmt::formatter<std::string_view> {
  auto format(const strata::Shape& s, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(strata::shape_str(s), ctx);
  }
};
