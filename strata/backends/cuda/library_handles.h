#pragma once

// What the plugin's library calls share: the stream a NativeStream names, and one library handle per device for
// the calling thread.

#include "strata/kernels/gpu_vendor.h"

#include <cstddef>
#include <vector>

#include "strata/runtime/backend.h"

namespace strata::cuda {

/// The CUDA stream a NativeStream names: nullptr is the legacy default stream (Note [The CUDA default stream is the
/// legacy stream] in cuda_backend.cpp).
inline cudaStream_t to_cuda_stream(NativeStream stream) {
  return stream == nullptr ? cudaStreamLegacy : static_cast<cudaStream_t>(stream);
}

/// A library's handles (cuBLAS, cuDNN) for one host thread, one per device, each with what the library needs beside
/// it (`Extra`). A handle belongs to the device current when it was created and must not be used by two threads at
/// once, so each thread keeps its own, made on first use by the caller (at(device).handle is null until then) and
/// pointed at the op's stream before every call. At thread exit the handles are destroyed first, then their extras;
/// the runtime may already be going away, and a destructor must not throw, so failures are dropped.
template <typename Handle, typename Status, Status (*Destroy)(Handle), typename Extra = std::nullptr_t>
class ThreadHandles {
 public:
  struct Entry {
    Handle handle = nullptr;
    Extra extra{};
  };

  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (Entry& e : entries_) {
      if (e.handle != nullptr && Destroy(e.handle) != Status{}) (void)cudaGetLastError();
    }
  }

  Entry& at(int device) {
    const auto i = static_cast<std::size_t>(device);
    if (i >= entries_.size()) entries_.resize(i + 1);
    return entries_[i];
  }

 private:
  std::vector<Entry> entries_;
};

}  // namespace strata::cuda
