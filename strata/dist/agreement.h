#pragma once

// What every backend of ProcessGroup compares before a collective (Note [Checking that ranks agree]): a few integers
// describing the call, gathered from every rank.

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "strata/dist/process_group.h"

namespace strata::dist::detail {

enum class Kind : int64_t { AllReduce = 1, Broadcast, AllGather, ReduceScatter, Barrier };
const char* kind_name(Kind kind);

inline constexpr int kMaxDims = 7;
/// kind, dtype, reduce op, root, ndim, dims...
using Descriptor = std::array<int64_t, 5 + kMaxDims>;

Descriptor describe(Kind kind, const Tensor& t, ReduceOp op, int root);
/// "all_reduce of [2, 3] f32 (sum)".
std::string describe_text(const Descriptor& d);
/// `all` holds every rank's descriptor, rank by rank; throws CollectiveMismatchError naming rank 0's call and the
/// first rank whose call differs.
void check_agreement(const int64_t* all, int world_size);

/// A host group that checks the agreement of another group's collectives (a DeviceGroup's on the MPI world) in one
/// host exchange of the descriptor alone: an all_gather of the host group would cost two, since the host group checks
/// its own all_gather first (Note [Checking that ranks agree]).
class AgreementExchange {
 public:
  virtual ~AgreementExchange() = default;
  /// Queues the exchange of `mine` behind this group's collectives issued so far (the order every rank keeps);
  /// wait() throws CollectiveMismatchError when the ranks' descriptors differ. `where` ("on cuda:0") completes the
  /// call's name in the messages of a mismatch or a timeout.
  virtual std::shared_ptr<Work> agree(const Descriptor& mine, const std::string& where) = 0;
};

}  // namespace strata::dist::detail
