#include "base/demand_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace sluice::demand_pages_internal {
namespace {

size_t PageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

void* Map(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "DemandPages: mmap of %zu bytes failed: %s\n", bytes,
                 std::strerror(errno));
    std::abort();
  }
  // Base pages, so that what is resident follows what was written (a huge
  // page would make one written row cost 2 MiB).
  madvise(p, bytes, MADV_NOHUGEPAGE);
  return p;
}

void Unmap(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes);
}

void Discard(void* p, size_t bytes) {
  // MADV_DONTNEED on a private anonymous mapping: the next touch maps a
  // fresh zero page.
  if (p != nullptr) madvise(p, bytes, MADV_DONTNEED);
}

uint64_t Resident(const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return 0;
  const size_t page = PageBytes();
  const size_t pages = (bytes + page - 1) / page;
  std::vector<unsigned char> in(pages);
  if (mincore(const_cast<void*>(p), bytes, in.data()) != 0) return 0;
  uint64_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n * page;
}

}  // namespace sluice::demand_pages_internal
