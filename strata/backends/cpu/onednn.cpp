#if STRATA_HAVE_DNNL

#include "strata/backends/cpu/onednn.h"

#include <pthread.h>

#include <mutex>
#include <new>
#include <shared_mutex>
#include <vector>

namespace strata::cpu {

// Note [oneDNN across fork]
// fork() copies only the calling thread, and every lock as it was. oneDNN takes a process-wide lock of its own
// inside primitive creation (its primitive cache), and Strata's caches of primitives (conv.cpp, matmul.cpp) have a
// mutex each: a fork while another thread holds one left the child waiting for ever at its first convolution (1 run
// in 29 of test_fork's "fork while another thread computes"). oneDNN has no fork handler, so Strata keeps every
// thread out of it across fork: primitives are created holding creation_lock() shared, and the fork handlers below
// take it exclusively, then the caches' mutexes, in prepare, and give them back in parent and child, as glibc does
// for malloc. Creation is rare (a cache miss), so readers never keep the handler waiting long; lookups take only
// their cache's mutex.

namespace {

struct ForkLocks {
  std::shared_mutex creation;
  std::mutex registered_mutex;  // guards `caches`
  std::vector<std::mutex*> caches;
};

ForkLocks& fork_locks();

void release_caches() {
  ForkLocks& l = fork_locks();
  for (auto it = l.caches.rbegin(); it != l.caches.rend(); ++it) (*it)->unlock();
  l.registered_mutex.unlock();
}

ForkLocks& fork_locks() {
  static ForkLocks* const locks = [] {
    auto* created = new ForkLocks();  // never destroyed: a fork may come while statics are destroyed
    pthread_atfork(
        [] {
          ForkLocks& l = fork_locks();
          l.creation.lock();
          l.registered_mutex.lock();
          for (std::mutex* m : l.caches) m->lock();
        },
        [] {
          release_caches();
          fork_locks().creation.unlock();
        },
        [] {
          release_caches();
          // glibc's rwlock knows its writer by thread id, and the child's thread has a new one: unlocking there
          // would be read as a reader's unlock and leave it write-locked. The child has no other thread, so a new,
          // unlocked one replaces it.
          new (&fork_locks().creation) std::shared_mutex();
        });
    return created;
  }();
  return *locks;
}

}  // namespace

std::shared_lock<std::shared_mutex> creation_lock() { return std::shared_lock(fork_locks().creation); }

void hold_across_fork(std::mutex& cache_mutex) {
  ForkLocks& l = fork_locks();
  std::lock_guard lock(l.registered_mutex);
  l.caches.push_back(&cache_mutex);
}

}  // namespace strata::cpu

#endif  // STRATA_HAVE_DNNL
