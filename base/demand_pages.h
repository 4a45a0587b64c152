// An array whose memory the kernel provides page by page, when first
// written: an anonymous private mapping reserved (MAP_NORESERVE) for the
// whole capacity but resident only where touched, every untouched element
// reading as zero. Release gives the touched pages back (they read as zero
// again). This is how a sequence's KV cache costs the host memory of the
// positions it has written, not of its capacity: `capacity x sessions` is
// address space, the scheduler's KV block pool bounds what is resident
// (docs/BATCHING.md, "Paged KV").
//
// T must be trivially copyable and all-zero bytes must be its zero value.
//
// Thread-safety: none beyond a plain array's (disjoint elements may be
// written from different threads).
#ifndef SLUICE_BASE_DEMAND_PAGES_H_
#define SLUICE_BASE_DEMAND_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace sluice {

namespace demand_pages_internal {
// An anonymous mapping of `bytes` (nullptr for 0); aborts when the address
// space is exhausted (as operator new would on an allocation failure).
void* Map(size_t bytes);
void Unmap(void* p, size_t bytes);
// Gives the pages of [p, p + bytes) back; they read as zero afterwards.
void Discard(void* p, size_t bytes);
// Bytes of [p, p + bytes) resident in memory (mincore), whole pages.
uint64_t Resident(const void* p, size_t bytes);
}  // namespace demand_pages_internal

template <typename T>
class DemandPages {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  DemandPages() = default;
  explicit DemandPages(size_t n)
      : data_(static_cast<T*>(demand_pages_internal::Map(n * sizeof(T)))), size_(n) {}
  DemandPages(DemandPages&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DemandPages& operator=(DemandPages&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DemandPages(const DemandPages&) = delete;
  DemandPages& operator=(const DemandPages&) = delete;
  ~DemandPages() { Free(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

  // Every element reads as zero again and no page stays resident.
  void Release() { demand_pages_internal::Discard(data_, size_ * sizeof(T)); }
  // Bytes resident now (whole pages).
  uint64_t resident_bytes() const {
    return demand_pages_internal::Resident(data_, size_ * sizeof(T));
  }

 private:
  void Free() {
    demand_pages_internal::Unmap(data_, size_ * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_BASE_DEMAND_PAGES_H_
