// embedding: rows of a table picked by integer indices. The index_select kernel runs under the name "embedding",
// so an index out of range is a device-side assert that names embedding, the element and the value (Note
// [Device-side asserts]); the gradient adds each picked row's gradient back into its row (index_add semantics).

#include <vector>

#include "strata/core/error.h"
#include "strata/nn/functional.h"
#include "strata/ops/checks.h"
#include "strata/ops/indexing_kernels.h"
#include "strata/tensor/autograd_support.h"
#include "strata/tensor/factories.h"
#include "strata/tensor/functions.h"
#include "strata/tensor/op_call.h"

namespace strata::nn::functional {

namespace {
const ops::KernelSlot<ops::IndexSelectFn> index_select_slot("index_select");
}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  constexpr const char* op = "embedding";
  STRATA_CHECK(indices.defined() && weight.defined(), InvalidArgumentError, "{}: indices and weight must be defined",
               op);
  const TensorView iv = indices.view(), wv = weight.view();
  ops::check_same_device(op, {&iv, &wv});
  STRATA_CHECK(is_integral(indices.dtype()) && indices.dtype() != DType::Bool, DTypeError,
               "{}: indices must be an integer tensor (such as i64), got {}", op, indices.dtype());
  STRATA_CHECK(weight.dim() == 2, ShapeError, "{}: weight must be a 2-D table [num_embeddings, dim], got shape {}", op,
               weight.shape());
  const int64_t count = indices.numel(), dim = weight.size(1);
  const Tensor idx = indices.to(DType::I64).reshape({count}).contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = empty({count, dim}, TensorOptions(weight.dtype()).device(weight.device()));
  if (out.numel() > 0) {
    const Tensor table = weight.contiguous();
    index_select_slot.get(weight.device())(detail::op_call(op, weight.device()), out.view(), table.view(), idx.view(),
                                           0);
  }
  out = out.reshape(out_shape);
  if (detail::needs_grad({&weight})) {
    detail::record(op, {&weight}, out, [shape = weight.shape(), idx, count, dim](const Tensor& g) {
      const Tensor rows = idx.reshape({count, 1}).expand({count, dim});
      return std::vector<Tensor>{scatter_add(zeros(shape, TensorOptions(g.dtype()).device(g.device())), 0, rows,
                                             g.reshape({count, dim}).contiguous())};
    }, detail::Saves::kNothing);
  }
  return out;
}

}  // namespace strata::nn::functional
