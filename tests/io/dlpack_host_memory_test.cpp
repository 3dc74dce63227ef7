// from_dlpack refuses a descriptor whose host memory is not there (Note [Checking a DLPack producer's host memory]):
// data in an unmapped or unreadable page, a byte_offset far past its buffer, more dims than a tensor has. The caller
// keeps ownership of what is refused.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "strata/core/error.h"
#include "strata/io/dlpack.h"

namespace strata {
namespace {

// A CPU float tensor of `count` elements described over `data`, owned by the test (no deleter).
struct Descriptor {
  std::vector<int64_t> shape;
  DLManagedTensor managed{};

  Descriptor(void* data, int64_t count) : shape{count} {
    DLTensor& dl = managed.dl_tensor;
    dl.data = data;
    dl.device = {kDLCPU, 0};
    dl.ndim = 1;
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape.data();
  }
};

// Anonymous pages with the given protection, unmapped at the end of the test.
struct Page {
  std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::size_t count;
  void* address;
  explicit Page(int protection, std::size_t pages = 1)
      : count(pages), address(mmap(nullptr, size * pages, protection, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {}
  ~Page() { munmap(address, size * count); }
};

TEST(DLPackHostMemory, DataInAReadablePageIsTaken) {
  Page page(PROT_READ | PROT_WRITE);
  Descriptor d(page.address, 4);
  const Tensor t = io::from_dlpack(&d.managed);
  EXPECT_EQ(t.data_ptr(), page.address);
}

TEST(DLPackHostMemory, DataInAnUnmappedPageIsRefused) {
  void* gone = nullptr;
  {
    Page page(PROT_READ | PROT_WRITE);
    gone = page.address;
  }
  Descriptor d(gone, 4);
  EXPECT_THROW(io::from_dlpack(&d.managed), InvalidArgumentError);
}

TEST(DLPackHostMemory, DataInAPageWithoutAccessIsRefused) {
  Page guard(PROT_NONE);  // mapped, as a guard region is, yet nothing can be read there
  Descriptor d(guard.address, 4);
  EXPECT_THROW(io::from_dlpack(&d.managed), InvalidArgumentError);
}

TEST(DLPackHostMemory, AByteOffsetPastTheBufferIntoUnmappedMemoryIsRefused) {
  Page pages(PROT_READ | PROT_WRITE, 2);
  munmap(static_cast<char*>(pages.address) + pages.size, pages.size);  // our second page, surely absent now
  pages.count = 1;  // the destructor must not unmap the second page again: someone else may have mapped it since
  Descriptor d(pages.address, 4);
  d.managed.dl_tensor.byte_offset = pages.size;
  EXPECT_THROW(io::from_dlpack(&d.managed), InvalidArgumentError);
}

TEST(DLPackHostMemory, AShapeArrayInUnmappedMemoryIsRefused) {
  Page page(PROT_READ | PROT_WRITE);
  Page gone(PROT_NONE);
  Descriptor d(page.address, 4);
  d.managed.dl_tensor.shape = static_cast<int64_t*>(gone.address);
  EXPECT_THROW(io::from_dlpack(&d.managed), InvalidArgumentError);
}

TEST(DLPackHostMemory, MoreThan64DimsAreRefused) {
  Page page(PROT_READ | PROT_WRITE);
  Descriptor d(page.address, 1);
  std::vector<int64_t> ones(65, 1);
  d.managed.dl_tensor.shape = ones.data();
  d.managed.dl_tensor.ndim = 65;
  EXPECT_THROW(io::from_dlpack(&d.managed), InvalidArgumentError);
  d.managed.dl_tensor.ndim = 64;
  EXPECT_EQ(io::from_dlpack(&d.managed).dim(), 64);
}

}  // namespace
}  // namespace strata
