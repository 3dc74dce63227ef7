#pragma once

#include <functional>
#include <string>
#include <vector>

#include "strata/tensor/tensor.h"

namespace strata::autograd {

struct GradcheckResult {
  bool ok = false;
  double max_abs_error = 0;
  /// Where the worst mismatch is, with the numerical and analytical values.
  std::string report;
};

/// Compares the gradients computed by backward with central finite differences, for every input that requires
/// grad. Use f64 inputs. The check projects the output on a fixed random vector v and compares d(v·f)/dx.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);

}  // namespace strata::autograd
