#pragma once

#include "strata/runtime/collectives.h"

namespace strata::cuda {

/// Registers NCCL as the collective library of CUDA tensors (Note [NCCL is loaded, not linked] in
/// nccl_library.cpp); NCCL itself is loaded when the first collective needs it.
void register_nccl();

}  // namespace strata::cuda
