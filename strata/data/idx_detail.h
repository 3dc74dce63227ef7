#pragma once

// read_idx with the number of dimensions the caller expects, for the dataset readers (not in strata/strata.h).

#include <filesystem>
#include <string_view>

#include "strata/tensor/tensor.h"

namespace strata::data::detail {

/// read_idx, refusing a header that declares another number of dimensions than `ndim` before reading any data:
/// "'…' declares 3 dimensions, but a labels file has 1". `what` names the kind of file ("a labels file").
Tensor read_idx_of_rank(const std::filesystem::path& path, int ndim, std::string_view what);

}  // namespace strata::data::detail
