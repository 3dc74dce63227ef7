#include "strata/dist/agreement.h"

#include <algorithm>
#include <vector>

#include "strata/core/error.h"

namespace strata::dist::detail {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Barrier: return "barrier";
  }
  return "collective";
}

Descriptor describe(Kind kind, const Tensor& t, ReduceOp op, int root) {
  Descriptor d{};
  d[0] = static_cast<int64_t>(kind);
  if (t.defined()) {
    d[1] = static_cast<int64_t>(t.dtype());
    d[4] = t.dim();
    for (int64_t i = 0; i < std::min<int64_t>(t.dim(), kMaxDims); ++i) d[static_cast<std::size_t>(5 + i)] = t.size(i);
  }
  d[2] = static_cast<int64_t>(op);
  d[3] = root;
  return d;
}

std::string describe_text(const Descriptor& d) {
  const auto kind = static_cast<Kind>(d[0]);
  std::vector<int64_t> dims(d.begin() + 5, d.begin() + 5 + std::clamp<int64_t>(d[4], 0, kMaxDims));
  std::string text = fmt::format("{} of [{}] {}", kind_name(kind), fmt::join(dims, ", "),
                                 dtype_name(static_cast<DType>(d[1])));
  if (kind == Kind::AllReduce || kind == Kind::ReduceScatter) {
    text += fmt::format(" ({})", reduce_op_name(static_cast<ReduceOp>(d[2])));
  }
  if (kind == Kind::Broadcast) text += fmt::format(" from rank {}", d[3]);
  return text;
}

void check_agreement(const int64_t* all, int world_size) {
  Descriptor first;
  std::copy_n(all, first.size(), first.begin());
  for (int r = 1; r < world_size; ++r) {
    Descriptor other;
    std::copy_n(all + static_cast<std::ptrdiff_t>(r * first.size()), other.size(), other.begin());
    if (other != first) {
      STRATA_THROW(CollectiveMismatchError,
                   "ranks disagree on a collective: rank 0 called {}, but rank {} called {} (every rank must issue "
                   "the same collectives in the same order, with the same shapes and dtypes)",
                   describe_text(first), r, describe_text(other));
    }
  }
}

}  // namespace strata::dist::detail
