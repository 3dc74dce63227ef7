#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace strata {

// Note [Small objects are recycled per thread]
// Every op makes a TensorImpl for its result and a Storage for the result's memory, and the caching allocator
// splits a Block off a cached one (two pool nodes) and merges it back when the memory is freed; most of these small
// objects die as soon as the next op has run. malloc and free of them were a fifth of a 16-element add, so each
// thread keeps up to 64 freed blocks of each of their sizes and hands them out again, as malloc's own per-thread
// cache does, without its checks. A block freed on another thread than the one that allocated it joins the freeing
// thread's list; a thread's lists go back to the heap when it ends. Builds with AddressSanitizer bypass the lists,
// so that it still sees every use after free.

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kThreadCacheEnabled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kThreadCacheEnabled = false;
#else
inline constexpr bool kThreadCacheEnabled = true;
#endif
#else
inline constexpr bool kThreadCacheEnabled = true;
#endif

namespace detail {

/// The freed blocks of `Size` bytes that one thread keeps. Trivially destructible, so that it can be used until
/// the thread's very end; ThreadCacheCloser empties and closes it when the thread ends.
template <std::size_t Size>
struct ThreadCacheList {
  struct Entry {
    Entry* next;
  };
  static constexpr int kCapacity = 64;
  Entry* head;
  int count;
  bool closed;  // the thread is ending: blocks go straight back to the heap
};

template <std::size_t Size>
inline thread_local ThreadCacheList<Size> thread_cache_list{};

template <std::size_t Size>
struct ThreadCacheCloser {
  ~ThreadCacheCloser() {
    ThreadCacheList<Size>& list = thread_cache_list<Size>;
    list.closed = true;
    while (list.head != nullptr) {
      auto* entry = list.head;
      list.head = entry->next;
      ::operator delete(entry);
    }
    list.count = 0;
  }
};

}  // namespace detail

/// A standard allocator whose single objects come from, and go back to, the calling thread's list of freed blocks
/// of their size (Note [Small objects are recycled per thread]). For small objects made and dropped at a high rate.
template <typename T>
class ThreadCacheAllocator {
 public:
  using value_type = T;

  ThreadCacheAllocator() = default;
  template <typename U>
  ThreadCacheAllocator(const ThreadCacheAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    static_assert(sizeof(T) >= sizeof(typename List::Entry) && alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    List& list = detail::thread_cache_list<sizeof(T)>;
    if (!kThreadCacheEnabled || n != 1 || list.head == nullptr) return static_cast<T*>(::operator new(n * sizeof(T)));
    auto* entry = list.head;
    list.head = entry->next;
    --list.count;
    return reinterpret_cast<T*>(entry);
  }

  void deallocate(T* p, std::size_t n) noexcept {
    List& list = detail::thread_cache_list<sizeof(T)>;
    if (!kThreadCacheEnabled || n != 1 || list.closed || list.count == List::kCapacity) {
      ::operator delete(p);
      return;
    }
    if (list.count == 0) {
      // The first block kept since the list was last empty: make sure the thread's end empties the list.
      thread_local detail::ThreadCacheCloser<sizeof(T)> closer;
      (void)closer;
    }
    list.head = ::new (static_cast<void*>(p)) typename List::Entry{list.head};
    ++list.count;
  }

  friend bool operator==(const ThreadCacheAllocator&, const ThreadCacheAllocator&) { return true; }

 private:
  using List = detail::ThreadCacheList<sizeof(T)>;
};

}  // namespace strata
