// Printing tensors the way PyTorch does (nested brackets, aligned columns, 4 decimals, "..." summaries), followed
// by a trailer line that names the shape, dtype and device.

#include "strata/tensor/print.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/tensor/functions.h"

namespace strata {

namespace {

constexpr int64_t kSummaryThreshold = 1000;  // more elements than this are summarised
constexpr int64_t kEdgeItems = 3;            // values kept at each end of a summarised dimension
constexpr std::size_t kLineWidth = 80;

// Note [Printing like PyTorch]
// The rules are those of torch/_tensor_str.py with its default options: one format for all values, chosen from the
// non-zero finite ones: integers print as "3." when every value is whole, otherwise with 4 decimals, and in
// scientific notation when the magnitudes span more than 1000x, exceed 1e8, or (for non-whole values) go below
// 1e-4. Every value is right-aligned to the widest. A summarised tensor keeps the first and last 3 entries of each
// dimension longer than 6, and the format is chosen from those only.

/// Turns values into equally wide strings with the format PyTorch would choose for them.
class Formatter {
 public:
  explicit Formatter(const std::vector<double>& values) {
    std::vector<double> finite;
    for (double v : values) {
      if (std::isfinite(v) && v != 0.0) finite.push_back(std::abs(v));
    }
    if (finite.empty()) return;
    int_mode_ = std::all_of(finite.begin(), finite.end(), [](double v) { return v == std::ceil(v); });
    const auto [min_it, max_it] = std::minmax_element(finite.begin(), finite.end());
    const double min = *min_it;
    const double max = *max_it;
    sci_mode_ = max / min > 1000.0 || max > 1.0e8 || (!int_mode_ && min < 1.0e-4);
    for (double v : values) {
      if (std::isfinite(v) && v != 0.0) width_ = std::max(width_, format_raw(v).size());
    }
  }
  explicit Formatter(std::size_t width) : width_(width) {}

  /// The value, padded on the left to the common width.
  std::string format(double v) const { return pad(format_raw(v)); }
  std::string pad(const std::string& s) const {
    return s.size() >= width_ ? s : std::string(width_ - s.size(), ' ') + s;
  }
  std::size_t width() const { return width_; }

 private:
  std::string format_raw(double v) const {
    if (sci_mode_) return fmt::format("{:.4e}", v);
    if (int_mode_) return fmt::format("{:.0f}", v) + (std::isfinite(v) ? "." : "");
    return fmt::format("{:.4f}", v);
  }

  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t width_ = 1;
};

/// The printed values of `t` as strings in row-major order, and the format's width.
std::vector<std::string> cells_of(const Tensor& host_data, std::size_t& width) {
  std::vector<std::string> cells;
  if (is_floating(host_data.dtype())) {
    const std::vector<double> values = host_data.to_vector<double>();
    const Formatter formatter(values);
    for (double v : values) cells.push_back(formatter.format(v));
    width = formatter.width();
    return cells;
  }
  if (host_data.dtype() == DType::Bool) {
    for (bool v : host_data.to_vector<bool>()) cells.emplace_back(v ? "True" : "False");
  } else {
    for (int64_t v : host_data.to_vector<int64_t>()) cells.push_back(fmt::format("{}", v));
  }
  width = 1;
  for (const std::string& c : cells) width = std::max(width, c.size());
  const Formatter formatter(width);
  for (std::string& c : cells) c = formatter.pad(c);
  return cells;
}

/// Lays out the cells of a (possibly summarised) tensor; cut[d] marks dimensions that lost their middle.
class Layout {
 public:
  Layout(const std::vector<std::string>& cells, const Shape& shape, const std::vector<bool>& cut, std::size_t width)
      : cells_(cells), shape_(shape), cut_(cut), width_(width) {}

  std::string str(std::size_t d, std::size_t indent) {
    const std::size_t sub_dims = shape_.size() - d;
    std::vector<std::string> parts;
    if (sub_dims == 1) {
      for (int64_t i = 0; i < shape_[d]; ++i) {
        if (cut_[d] && i == kEdgeItems) parts.emplace_back(" ...");
        parts.push_back(cells_[next_++]);
      }
      // Rows wrap at 80 columns as in PyTorch; " ..." counts as one element.
      const std::size_t per_line = std::max<std::size_t>(1, (kLineWidth - std::min(indent, kLineWidth)) / (width_ + 2));
      std::string out = "[";
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        out += parts[i];
      }
      return out + "]";
    }
    for (int64_t i = 0; i < shape_[d]; ++i) {
      if (cut_[d] && i == kEdgeItems) parts.emplace_back("...");
      parts.push_back(str(d + 1, indent + 1));
    }
    const std::string separator = "," + std::string(sub_dims - 1, '\n') + std::string(indent + 1, ' ');
    std::string out = "[";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? separator : "") + parts[i];
    return out + "]";
  }

 private:
  const std::vector<std::string>& cells_;
  const Shape& shape_;
  const std::vector<bool>& cut_;
  std::size_t width_;
  std::size_t next_ = 0;
};

std::string values_str(const Tensor& t, std::size_t indent) {
  if (t.numel() == 0) return "[]";
  const bool summarize = t.numel() > kSummaryThreshold;
  // Cut the middle out on the tensor's own device, so that only what is printed is copied to the host.
  Tensor data = t;
  std::vector<bool> cut(static_cast<std::size_t>(t.dim()), false);
  for (int64_t d = 0; summarize && d < t.dim(); ++d) {
    const int64_t size = t.size(d);
    if (size <= 2 * kEdgeItems) continue;
    data = cat({data.narrow(d, 0, kEdgeItems), data.narrow(d, size - kEdgeItems, kEdgeItems)}, d);
    cut[static_cast<std::size_t>(d)] = true;
  }
  std::size_t width = 1;
  const std::vector<std::string> cells = cells_of(data.device().is_cpu() ? data : data.to(kCPU), width);
  if (t.dim() == 0) return cells[0];
  return Layout(cells, data.shape(), cut, width).str(0, indent);
}

std::string trailer(const Tensor& t) {
  const std::string shape = t.dim() == 0 ? "scalar" : fmt::format("{}", fmt::join(t.shape(), "x"));
  return fmt::format("<Tensor {} {} @{}>", shape, t.dtype(), t.device());
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "<Tensor undefined>";
  return values_str(*this, 0) + "\n" + trailer(*this);
}

std::string format_values(const Tensor& t, std::size_t indent) {
  STRATA_CHECK(t.defined(), InvalidArgumentError, "format_values: the tensor is undefined");
  return values_str(t, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace strata
