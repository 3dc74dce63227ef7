#pragma once

#include <cstddef>
#include <string>

#include "strata/tensor/tensor.h"

namespace strata {

/// The values of `t` as Tensor::str() prints them (PyTorch's layout: summarised when large, rows wrapped at 80
/// columns), with continuation lines indented by `indent` more columns: what a wrapper such as Python's
/// `tensor(...)` puts in front of them.
std::string format_values(const Tensor& t, std::size_t indent = 0);

}  // namespace strata
