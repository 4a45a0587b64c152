// The driver's virtual memory management, reached through the runtime's
// entry-point lookup; g++ compiles this file (no kernels).
#include "kernels/cuda/device_pages.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice::cuda {

struct DevicePagePool::Driver {
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
  CUmemAllocationProp prop{};
  CUmemAccessDesc access{};

  absl::Status Check(CUresult rc, const std::string& what) const {
    if (rc == CUDA_SUCCESS) return absl::OkStatus();
    const char* name = nullptr;
    if (error_name == nullptr || error_name(rc, &name) != CUDA_SUCCESS) name = "unknown";
    const std::string msg = absl::StrCat(what, ": ", name, " (", static_cast<int>(rc), ")");
    return rc == CUDA_ERROR_OUT_OF_MEMORY ? absl::ResourceExhaustedError(msg)
                                          : absl::InternalError(msg);
  }
};

namespace {

template <typename F>
absl::Status Lookup(const char* symbol, F* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t rc =
      cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found);
  if (rc != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "the CUDA driver has no ", symbol, " (virtual memory management): ",
        cudaGetErrorName(rc)));
  }
  *out = reinterpret_cast<F>(fn);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<DevicePagePool>> DevicePagePool::Create() {
  std::shared_ptr<DevicePagePool> pool(new DevicePagePool());
  pool->driver_ = std::make_unique<Driver>();
  Driver& d = *pool->driver_;
  RETURN_IF_ERROR(Lookup("cuGetErrorName", &d.error_name));
  RETURN_IF_ERROR(Lookup("cuMemCreate", &d.create));
  RETURN_IF_ERROR(Lookup("cuMemRelease", &d.release));
  RETURN_IF_ERROR(Lookup("cuMemMap", &d.map));
  RETURN_IF_ERROR(Lookup("cuMemUnmap", &d.unmap));
  RETURN_IF_ERROR(Lookup("cuMemSetAccess", &d.set_access));
  RETURN_IF_ERROR(Lookup("cuMemAddressReserve", &d.reserve));
  RETURN_IF_ERROR(Lookup("cuMemAddressFree", &d.address_free));
  RETURN_IF_ERROR(Lookup("cuMemGetAllocationGranularity", &d.granularity));
  // The runtime's primary context must exist before the driver calls.
  if (cudaError_t rc = cudaFree(nullptr); rc != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cudaFree(0): ", cudaGetErrorName(rc)));
  }
  if (cudaError_t rc = cudaGetDevice(&pool->device_); rc != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cudaGetDevice: ", cudaGetErrorName(rc)));
  }
  d.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  d.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.prop.location.id = pool->device_;
  d.access.location = d.prop.location;
  d.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t granularity = 0;
  RETURN_IF_ERROR(d.Check(
      d.granularity(&granularity, &d.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "cuMemGetAllocationGranularity"));
  if (granularity == 0) return absl::InternalError("cuMemGetAllocationGranularity gave 0");
  pool->page_bytes_ = granularity;
  return pool;
}

DevicePagePool::~DevicePagePool() {
  for (uint64_t page : free_) driver_->release(static_cast<CUmemGenericAllocationHandle>(page));
}

absl::StatusOr<uint64_t> DevicePagePool::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    const uint64_t page = free_.back();
    free_.pop_back();
    return page;
  }
  CUmemGenericAllocationHandle h = 0;
  RETURN_IF_ERROR(driver_->Check(driver_->create(&h, page_bytes_, &driver_->prop, 0),
                                 absl::StrCat("cuMemCreate(", page_bytes_, " bytes; ",
                                              created_, " KV pages held)")));
  ++created_;
  return static_cast<uint64_t>(h);
}

void DevicePagePool::Give(uint64_t page) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(page);
}

int64_t DevicePagePool::pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

int64_t DevicePagePool::free_pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(free_.size());
}

absl::StatusOr<DeviceRange> DeviceRange::Reserve(std::shared_ptr<DevicePagePool> pool,
                                                 uint64_t bytes) {
  DeviceRange r;
  const uint64_t page = pool->page_bytes();
  r.reserved_ = (bytes + page - 1) / page * page;
  if (r.reserved_ > 0) {
    CUdeviceptr base = 0;
    RETURN_IF_ERROR(pool->driver().Check(pool->driver().reserve(&base, r.reserved_, page, 0, 0),
                                         absl::StrCat("cuMemAddressReserve(", r.reserved_,
                                                      " bytes)")));
    r.base_ = static_cast<uint64_t>(base);
  }
  r.pool_ = std::move(pool);
  return r;
}

DeviceRange::DeviceRange(DeviceRange&& o) noexcept
    : pool_(std::move(o.pool_)),
      base_(std::exchange(o.base_, 0)),
      reserved_(std::exchange(o.reserved_, 0)),
      pages_(std::move(o.pages_)) {
  o.pages_.clear();
}

DeviceRange& DeviceRange::operator=(DeviceRange&& o) noexcept {
  if (this != &o) {
    Free();
    pool_ = std::move(o.pool_);
    base_ = std::exchange(o.base_, 0);
    reserved_ = std::exchange(o.reserved_, 0);
    pages_ = std::move(o.pages_);
    o.pages_.clear();
  }
  return *this;
}

DeviceRange::~DeviceRange() { Free(); }

void DeviceRange::Free() {
  if (pool_ == nullptr) return;
  Release();
  if (base_ != 0) pool_->driver().address_free(static_cast<CUdeviceptr>(base_), reserved_);
  base_ = 0;
  reserved_ = 0;
  pool_.reset();
}

absl::Status DeviceRange::Commit(uint64_t bytes, Stream stream) {
  if (pool_ == nullptr) return absl::OkStatus();
  const DevicePagePool::Driver& d = pool_->driver();
  const uint64_t page = page_bytes();
  const uint64_t want = (std::min(bytes, reserved_) + page - 1) / page;
  while (pages_.size() < want) {
    ASSIGN_OR_RETURN(const uint64_t handle, pool_->Take());
    const CUdeviceptr at = static_cast<CUdeviceptr>(base_ + pages_.size() * page);
    absl::Status s = d.Check(d.map(at, page, 0, static_cast<CUmemGenericAllocationHandle>(handle), 0),
                             "cuMemMap");
    if (s.ok()) {
      s = d.Check(d.set_access(at, page, &d.access, 1), "cuMemSetAccess");
      if (!s.ok()) d.unmap(at, page);
    }
    if (!s.ok()) {
      pool_->Give(handle);
      return s;
    }
    pages_.push_back(handle);
    // A page another range used: what a kernel reads beyond the written
    // rows of a tile must be finite, as in a fresh zeroed allocation.
    RETURN_IF_ERROR(Memset(reinterpret_cast<void*>(at), 0, page, stream));
  }
  return absl::OkStatus();
}

void DeviceRange::Release() {
  if (pool_ == nullptr) return;
  const DevicePagePool::Driver& d = pool_->driver();
  const uint64_t page = page_bytes();
  for (size_t i = pages_.size(); i-- > 0;) {
    d.unmap(static_cast<CUdeviceptr>(base_ + i * page), page);
    pool_->Give(pages_[i]);
  }
  pages_.clear();
}

}  // namespace sluice::cuda
