// The lock of Note [Replacing a tensor's data while other threads compute] (bindings.h).

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>

#include "bindings.h"

namespace strata::python {

namespace {

// Many computing, or one replacing. A mutex and a condition rather than std::shared_mutex: glibc's rwlock prefers
// readers, and two threads computing in a loop keep it read-held forever.
struct DataLock {
  std::mutex mutex;
  std::condition_variable changed;
  int computing = 0;  // threads inside a stretch without the GIL
  int waiting = 0;    // replacements waiting for them to leave
  bool replacing = false;
};

constexpr auto kPrecedence = std::chrono::milliseconds(20);
constexpr auto kForkWait = std::chrono::seconds(2);

thread_local int stretches = 0;  // how deep this thread is in nested Computing stretches
thread_local bool replacing_here = false;

DataLock& data_lock() {
  static DataLock* const lock = [] {
    auto* created = new DataLock();  // never destroyed: threads may still compute while statics are destroyed
    // Note [Forking while other threads compute]
    // fork() copies only the forking thread, and every lock as it was: a thread in the middle of an op may hold a
    // tensor's autograd mutex, an allocator's or a primitive cache's, and the child would wait for it for ever at its
    // first use of that tensor or cache. So the prepare handler first lets the stretches without the GIL that are
    // running end (new ones wait, as for a replacement), then forks: no Strata op is in flight in the child. It waits
    // at most kForkWait: an op may be waiting for the GIL, which the forking thread holds (a backward hook), and a
    // fork from inside a stretch cannot wait for itself; then the fork goes ahead as before. The child counts only
    // the forking thread, or the first replacement there would wait for threads that do not exist.
    pthread_atfork(
        [] {
          DataLock& l = data_lock();
          std::unique_lock hold(l.mutex);
          if (stretches == 0) {
            ++l.waiting;
            l.changed.wait_for(hold, kForkWait, [&] { return l.computing == 0; });
            --l.waiting;
          }
          hold.release();  // locked across the fork; the parent and child handlers unlock it
        },
        [] {
          data_lock().mutex.unlock();
          data_lock().changed.notify_all();  // stretches held back while the fork waited
        },
        [] {
          DataLock& l = data_lock();
          l.computing = stretches > 0 ? 1 : 0;
          l.waiting = 0;
          l.replacing = replacing_here;
          // Threads that waited on the condition in the parent are not in the child, but glibc's condition
          // variable still counts them and a broadcast could wait for them: a new one.
          new (&l.changed) std::condition_variable();
          l.mutex.unlock();
        });
    return created;
  }();
  return *lock;
}

// Made when the module loads, so that the fork handlers are in place before any thread can fork: made by the first
// stretch instead, a fork racing it would copy a count without the handler that corrects it.
[[maybe_unused]] DataLock& g_data_lock = data_lock();

}  // namespace

Computing::Computing() : outermost_(stretches == 0) {
  if (outermost_) {
    DataLock& l = data_lock();
    std::unique_lock hold(l.mutex);
    // A waiting replacement goes first, but only for a while: this thread may be one that an outer stretch on
    // another thread waits for (a DataLoader's worker running a Python Dataset while next() waits for its batch),
    // and waiting for the replacement there would wait for ever.
    l.changed.wait_for(hold, kPrecedence, [&] { return l.waiting == 0; });
    l.changed.wait(hold, [&] { return !l.replacing; });
    ++l.computing;
  }
  ++stretches;
}

Computing::~Computing() noexcept(false) {
  --stretches;
  if (outermost_) {
    DataLock& l = data_lock();
    {
      std::lock_guard hold(l.mutex);
      --l.computing;
    }
    l.changed.notify_all();
  }
  // release_ takes the GIL back after this body, as its destructor runs last.
}

void replacing_data(const char* what, const std::function<void()>& f) {
  STRATA_CHECK(stretches == 0, InvalidArgumentError,
               "{}: replaces tensors' data, which cannot happen inside a computation on the same thread (a backward "
               "hook, a Dataset run by a DataLoader's worker); do it before or after",
               what);
  DataLock& l = data_lock();
  {
    ReleasedGil release;  // the threads we wait for may need the GIL to finish
    std::unique_lock hold(l.mutex);
    ++l.waiting;
    l.changed.wait(hold, [&] { return !l.replacing && l.computing == 0; });
    --l.waiting;
    l.replacing = true;
  }
  replacing_here = true;
  const auto done = [&] {
    replacing_here = false;
    {
      std::lock_guard hold(l.mutex);
      l.replacing = false;
    }
    l.changed.notify_all();
  };
  try {
    f();
  } catch (...) {
    done();
    throw;
  }
  done();
}

}  // namespace strata::python
