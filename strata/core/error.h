#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata {

/// Base of every error Strata throws; nothing in Strata aborts the process on a recoverable failure.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

#define STRATA_DEFINE_ERROR(Name, Base)                           \
  class Name : public Base {                                      \
   public:                                                        \
    explicit Name(const std::string& message) : Base(message) {} \
  }

/// A value given by the caller is malformed or out of range (a device string, an option, a size).
STRATA_DEFINE_ERROR(InvalidArgumentError, Error);
/// A shape does not fit the operation.
STRATA_DEFINE_ERROR(ShapeError, InvalidArgumentError);
/// A dtype does not fit the operation.
STRATA_DEFINE_ERROR(DTypeError, InvalidArgumentError);
/// An index is outside the valid range.
STRATA_DEFINE_ERROR(IndexError, InvalidArgumentError);
/// A device was named that does not exist or cannot be used here (no driver, no plugin, index too high).
STRATA_DEFINE_ERROR(DeviceUnavailableError, Error);
/// The inputs of an operation live on different devices; Strata never copies behind the user's back.
STRATA_DEFINE_ERROR(DeviceMismatchError, Error);
/// A backend library (CUDA runtime, cuBLAS, oneDNN...) reported a failure.
STRATA_DEFINE_ERROR(BackendError, Error);
/// The allocator could not satisfy a request; the message explains why and what to do.
STRATA_DEFINE_ERROR(OutOfMemoryError, Error);
/// A `STRATA_KERNEL_ASSERT` failed inside a kernel.
STRATA_DEFINE_ERROR(DeviceAssertError, Error);
/// A synchronising call was made while `STRATA_SYNC_DEBUG=error`.
STRATA_DEFINE_ERROR(SyncDebugError, Error);
/// A feature that exists in the API but is not built yet.
STRATA_DEFINE_ERROR(NotImplementedError, Error);
/// Reading or writing a file failed, or its content is malformed.
STRATA_DEFINE_ERROR(IOError, Error);
/// A collective across processes failed: the transport reported an error, or a rank did not take part.
STRATA_DEFINE_ERROR(DistributedError, Error);
/// A collective did not finish within the process group's timeout.
STRATA_DEFINE_ERROR(CollectiveTimeoutError, DistributedError);
/// Ranks passed different ops, shapes or dtypes to the same collective.
STRATA_DEFINE_ERROR(CollectiveMismatchError, DistributedError);
/// A kernel compiled at run time (strata::jit) did not compile; the message carries the compiler's log.
STRATA_DEFINE_ERROR(CompileError, Error);

#undef STRATA_DEFINE_ERROR

}  // namespace strata

/// Throws `ErrorType` with a fmt-formatted message when `cond` is false.
#define STRATA_CHECK(cond, ErrorType, ...)                 \
  do {                                                      \
    if (!(cond)) [[unlikely]] {                             \
      throw ErrorType(::fmt::format(__VA_ARGS__));          \
    }                                                       \
  } while (false)

/// Throws `ErrorType` with a fmt-formatted message.
#define STRATA_THROW(ErrorType, ...) throw ErrorType(::fmt::format(__VA_ARGS__))
