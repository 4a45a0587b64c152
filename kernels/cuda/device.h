// The CUDA runtime calls the rest of the tree needs, behind a plain C++
// header: device selection, device memory, copies, streams, events, host
// registration and graph capture. CUDA stays in device.cu.
//
// A stream is the opaque `CUstream_st*` that cudaStream_t points to (nullptr:
// the legacy default stream); an event is `CUevent_st*`. Errors carry the
// CUDA error name and text: UNAVAILABLE where there is no driver or device,
// RESOURCE_EXHAUSTED when device memory runs out, INTERNAL otherwise.
//
// Thread-safety: as the CUDA runtime (calls are thread-safe; the current
// device is per thread, so call SetDevice on each thread that launches).
#ifndef SLUICE_KERNELS_CUDA_DEVICE_H_
#define SLUICE_KERNELS_CUDA_DEVICE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;

namespace sluice::cuda {

using Stream = CUstream_st*;
using Event = CUevent_st*;

// Makes `device` current for the calling thread. UNAVAILABLE when there is
// no such device (the message names the count found).
absl::Status SetDevice(int device);

// Free and total bytes of the current device.
absl::StatusOr<std::pair<uint64_t, uint64_t>> MemoryInfo();

// Device memory, aligned to at least 256 bytes. RESOURCE_EXHAUSTED names the
// request and the free bytes.
absl::StatusOr<void*> DeviceAlloc(uint64_t bytes);
void DeviceFree(void* d);

// Pinned (page-locked) host memory, and its release.
absl::StatusOr<void*> PinnedAlloc(uint64_t bytes);
void PinnedFree(void* h);

// Asynchronous on `stream` (synchronous for pageable host memory, as CUDA).
absl::Status CopyToDevice(void* d_dst, const void* h_src, uint64_t bytes,
                          Stream stream);
absl::Status CopyToHost(void* h_dst, const void* d_src, uint64_t bytes,
                        Stream stream);
// Copies dsts[i] <- srcs[i] (sizes[i] bytes; host to device, device to host
// or both, by where the pointers live), in stream order as a whole, in any
// order among themselves (they must not overlap): one cudaMemcpyBatchAsync,
// so the driver can spread them over its copy engines. Precondition: the
// three spans have the same length.
absl::Status CopyBatch(absl::Span<void* const> dsts, absl::Span<const void* const> srcs,
                       absl::Span<const size_t> sizes, Stream stream);
absl::Status CopyOnDevice(void* d_dst, const void* d_src, uint64_t bytes,
                          Stream stream);
absl::Status Memset(void* d_dst, int value, uint64_t bytes, Stream stream);

// Page-locks host memory for DMA (read_only: cudaHostRegisterReadOnly, for a
// read-only mapping) and maps it for the device; Unregister undoes it.
absl::Status HostRegister(const void* h, uint64_t bytes, bool read_only);
absl::Status HostUnregister(const void* h);
// The device address of registered (or pinned) host memory.
absl::StatusOr<void*> DevicePointerOf(const void* h);

// Streams. priority: 0 is the default; lower numbers are higher priority
// (CUDA's convention), clamped to the device's range.
absl::StatusOr<Stream> CreateStream(int priority = 0);
void DestroyStream(Stream stream);
absl::Status Synchronize(Stream stream);

absl::StatusOr<Event> CreateEvent(bool timing = false);
void DestroyEvent(Event event);
absl::Status RecordEvent(Event event, Stream stream);
// Like RecordEvent; while `stream` is being captured, the record becomes a
// node of the graph (cudaEventRecordExternal), so the host can wait for
// that point of a launched graph while the rest of it runs.
absl::Status RecordEventInGraph(Event event, Stream stream);
absl::Status StreamWaitEvent(Stream stream, Event event);
// Blocks the calling thread until the work recorded by `event` completed.
absl::Status WaitEvent(Event event);
// Whether the work recorded by `event` has completed (without blocking).
absl::StatusOr<bool> EventDone(Event event);
absl::StatusOr<float> ElapsedMs(Event start, Event end);

// The error of the last launch on this thread (and clears it).
absl::Status LastLaunchError(const char* what);

// A captured sequence of launches on one stream, replayed as one unit.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& other) noexcept
      : graph_(std::exchange(other.graph_, nullptr)),
        exec_(std::exchange(other.exec_, nullptr)),
        kernels_(other.kernels_) {}
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Starts capturing `stream` (thread-local mode: other threads may keep
  // launching on their own streams).
  static absl::Status BeginCapture(Stream stream);
  // Ends the capture and instantiates it.
  static absl::StatusOr<Graph> EndCapture(Stream stream);

  absl::Status Launch(Stream stream) const;
  bool valid() const { return exec_ != nullptr; }
  // Kernel nodes of the captured graph.
  int kernels() const { return kernels_; }

  // The median of `reps` timed launches of this graph in microseconds, each
  // after `flush_bytes` of `flush` are written (so its weights come from
  // memory, not L2).
  absl::StatusOr<double> TimeLaunches(Stream stream, int reps, void* flush,
                                      uint64_t flush_bytes) const;

  // Each kernel node of the graph launched alone, in capture order: its
  // kernel's name and the median of `reps` timed launches, each after
  // `flush_bytes` of `flush` are written (so the weights come from memory,
  // not L2). A kernel that updates state in place (a cache row, a
  // residual) runs `reps` more times: for a finished session's tools only.
  struct KernelTime {
    std::string name;
    double us = 0;
    unsigned grid[3] = {1, 1, 1};  // the node's launch shape
    unsigned block = 0;            // threads a block
  };
  absl::StatusOr<std::vector<KernelTime>> TimeKernels(Stream stream, int reps, void* flush,
                                                      uint64_t flush_bytes) const;

 private:
  Graph(CUgraph_st* graph, CUgraphExec_st* exec, int kernels)
      : graph_(graph), exec_(exec), kernels_(kernels) {}
  CUgraph_st* graph_ = nullptr;  // the captured nodes, kept for TimeKernels
  CUgraphExec_st* exec_ = nullptr;
  int kernels_ = 0;
};

namespace internal {
struct DeviceMemory {
  static absl::StatusOr<void*> Alloc(uint64_t bytes) { return DeviceAlloc(bytes); }
  static void Free(void* p) { DeviceFree(p); }
};
struct PinnedMemory {
  static absl::StatusOr<void*> Alloc(uint64_t bytes) { return PinnedAlloc(bytes); }
  static void Free(void* p) { PinnedFree(p); }
};
}  // namespace internal

// Owned memory of one kind (move-only): DeviceBuffer on the device,
// PinnedBuffer page-locked on the host.
template <typename Memory>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  ~OwnedBuffer() {
    if (data_ != nullptr) Memory::Free(data_);
  }
  OwnedBuffer(OwnedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
    if (this != &o) {
      if (data_ != nullptr) Memory::Free(data_);
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

  static absl::StatusOr<OwnedBuffer> Create(uint64_t bytes) {
    absl::StatusOr<void*> p = Memory::Alloc(bytes);
    if (!p.ok()) return p.status();
    OwnedBuffer b;
    b.data_ = *p;
    b.bytes_ = bytes;
    return b;
  }

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  uint64_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  uint64_t bytes_ = 0;
};

using DeviceBuffer = OwnedBuffer<internal::DeviceMemory>;
using PinnedBuffer = OwnedBuffer<internal::PinnedMemory>;

}  // namespace sluice::cuda

#endif  // SLUICE_KERNELS_CUDA_DEVICE_H_
