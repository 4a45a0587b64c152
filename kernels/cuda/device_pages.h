// Device memory mapped page by page on demand (CUDA virtual memory
// management): a sequence's KV cache reserves address space for its whole
// context and is backed by physical pages only for the positions it holds,
// so the pages the device spends on KV follow the scheduler's pool
// (sluiced --kv_cache_tokens), not sequences x context. The kernels see one
// contiguous range whose address never changes (a captured decode graph
// stays valid while pages come and go).
//
// DevicePagePool: physical pages of the device's allocation granularity
// (2 MiB on the GPUs measured), created when first needed and kept, once
// given back, for the next taker (creating and releasing a page costs the
// driver far more than mapping one). DeviceRange: reserved addresses whose
// first committed() bytes are mapped to pages of a pool.
//
// The driver's entry points are looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda directly.
//
// Thread-safety: the pool is thread-safe; a range is used by one thread at
// a time, and Release must not race kernels that read it (the caller
// synchronises the stream first).
#ifndef SLUICE_KERNELS_CUDA_DEVICE_PAGES_H_
#define SLUICE_KERNELS_CUDA_DEVICE_PAGES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"

namespace sluice::cuda {

class DevicePagePool {
 public:
  // A pool on the current device. UNAVAILABLE where the driver lacks
  // virtual memory management.
  static absl::StatusOr<std::shared_ptr<DevicePagePool>> Create();
  ~DevicePagePool();  // releases every page (all must have been given back)
  DevicePagePool(const DevicePagePool&) = delete;
  DevicePagePool& operator=(const DevicePagePool&) = delete;

  uint64_t page_bytes() const { return page_bytes_; }
  // A page: a given-back one, else a new one (RESOURCE_EXHAUSTED when the
  // device has no memory for it).
  absl::StatusOr<uint64_t> Take();
  void Give(uint64_t page);
  // Pages created (their device memory is held) and of those not taken.
  int64_t pages() const;
  int64_t free_pages() const;

  // What a range needs to reach these entry points (device.cc's style: the
  // driver types stay out of this header).
  struct Driver;
  const Driver& driver() const { return *driver_; }
  int device() const { return device_; }

 private:
  DevicePagePool() = default;
  std::unique_ptr<Driver> driver_;
  int device_ = 0;
  uint64_t page_bytes_ = 0;
  mutable std::mutex mu_;
  std::vector<uint64_t> free_;
  int64_t created_ = 0;
};

class DeviceRange {
 public:
  DeviceRange() = default;
  // Reserves `bytes` of addresses (rounded up to pages), nothing mapped.
  static absl::StatusOr<DeviceRange> Reserve(std::shared_ptr<DevicePagePool> pool,
                                             uint64_t bytes);
  DeviceRange(DeviceRange&& o) noexcept;
  DeviceRange& operator=(DeviceRange&& o) noexcept;
  DeviceRange(const DeviceRange&) = delete;
  DeviceRange& operator=(const DeviceRange&) = delete;
  ~DeviceRange();

  // Maps pages until the first `bytes` (at most reserved()) are backed; the
  // new pages are zeroed on `stream` before anything later on it reads
  // them. Commits less than committed() are no-ops. A page the pool cannot
  // give is RESOURCE_EXHAUSTED, and what was mapped stays.
  absl::Status Commit(uint64_t bytes, Stream stream);
  // Unmaps every page and gives it back to the pool. Precondition: no
  // kernel that reads the range is in flight.
  void Release();

  void* data() const { return reinterpret_cast<void*>(base_); }
  uint64_t reserved() const { return reserved_; }
  uint64_t committed() const { return pages_.size() * page_bytes(); }

 private:
  uint64_t page_bytes() const { return pool_ == nullptr ? 0 : pool_->page_bytes(); }
  void Free();

  std::shared_ptr<DevicePagePool> pool_;
  uint64_t base_ = 0;  // CUdeviceptr
  uint64_t reserved_ = 0;
  std::vector<uint64_t> pages_;  // mapped, in address order
};

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_DEVICE_PAGES_H_
