// The runtime's C API only (cuda_runtime_api.h): no kernels here, so g++
// compiles this file and the callers' header stays plain C++.
#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace sluice::cuda {
namespace {

absl::Status Error(cudaError_t rc, const std::string& what) {
  const std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(rc), " (",
                                       cudaGetErrorString(rc), ")");
  switch (rc) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(msg);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status Check(cudaError_t rc, const std::string& what) {
  return rc == cudaSuccess ? absl::OkStatus() : Error(rc, what);
}

}  // namespace

absl::Status SetDevice(int device) {
  int count = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess) {
    return Error(rc, "cudaGetDeviceCount");
  }
  if (device < 0 || device >= count) {
    return absl::UnavailableError(absl::StrCat(
        "CUDA device ", device, " does not exist (", count, " visible)"));
  }
  return Check(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> MemoryInfo() {
  size_t free_b = 0, total_b = 0;
  if (cudaError_t rc = cudaMemGetInfo(&free_b, &total_b); rc != cudaSuccess) {
    return Error(rc, "cudaMemGetInfo");
  }
  return std::make_pair(static_cast<uint64_t>(free_b),
                        static_cast<uint64_t>(total_b));
}

absl::StatusOr<void*> DeviceAlloc(uint64_t bytes) {
  void* d = nullptr;
  if (cudaError_t rc = cudaMalloc(&d, std::max<uint64_t>(bytes, 1));
      rc != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return Error(rc, absl::StrCat("cudaMalloc(", bytes, " bytes; ", free_b,
                                  " of ", total_b, " free)"));
  }
  return d;
}

void DeviceFree(void* d) {
  if (d != nullptr) cudaFree(d);
}

absl::StatusOr<void*> PinnedAlloc(uint64_t bytes) {
  void* h = nullptr;
  if (cudaError_t rc = cudaMallocHost(&h, std::max<uint64_t>(bytes, 1));
      rc != cudaSuccess) {
    cudaGetLastError();
    return Error(rc, absl::StrCat("cudaMallocHost(", bytes, " bytes)"));
  }
  return h;
}

void PinnedFree(void* h) {
  if (h != nullptr) cudaFreeHost(h);
}

absl::Status CopyToDevice(void* d_dst, const void* h_src, uint64_t bytes,
                          Stream stream) {
  return Check(cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice,
                               stream),
               "cudaMemcpyAsync(host to device)");
}

absl::Status CopyBatch(absl::Span<void* const> dsts, absl::Span<const void* const> srcs,
                       absl::Span<const size_t> sizes, Stream stream) {
  if (dsts.empty()) return absl::OkStatus();
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_index = 0;
  return Check(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(),
                                    dsts.size(), &attr, &attr_index, 1, stream),
               "cudaMemcpyBatchAsync");
}

absl::Status CopyToHost(void* h_dst, const void* d_src, uint64_t bytes,
                        Stream stream) {
  return Check(cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost,
                               stream),
               "cudaMemcpyAsync(device to host)");
}

absl::Status CopyOnDevice(void* d_dst, const void* d_src, uint64_t bytes,
                          Stream stream) {
  return Check(cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice,
                               stream),
               "cudaMemcpyAsync(device to device)");
}

absl::Status Memset(void* d_dst, int value, uint64_t bytes, Stream stream) {
  return Check(cudaMemsetAsync(d_dst, value, bytes, stream), "cudaMemsetAsync");
}

absl::Status HostRegister(const void* h, uint64_t bytes, bool read_only) {
  unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
  if (read_only) flags |= cudaHostRegisterReadOnly;
  return Check(cudaHostRegister(const_cast<void*>(h), bytes, flags),
               absl::StrCat("cudaHostRegister(", bytes, " bytes)"));
}

absl::Status HostUnregister(const void* h) {
  return Check(cudaHostUnregister(const_cast<void*>(h)), "cudaHostUnregister");
}

absl::StatusOr<void*> DevicePointerOf(const void* h) {
  void* d = nullptr;
  if (cudaError_t rc = cudaHostGetDevicePointer(&d, const_cast<void*>(h), 0);
      rc != cudaSuccess) {
    return Error(rc, "cudaHostGetDevicePointer");
  }
  return d;
}

absl::StatusOr<Stream> CreateStream(int priority) {
  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  const int p = std::clamp(priority, greatest, least);
  cudaStream_t s = nullptr;
  if (cudaError_t rc = cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, p);
      rc != cudaSuccess) {
    return Error(rc, "cudaStreamCreateWithPriority");
  }
  return s;
}

void DestroyStream(Stream stream) {
  if (stream != nullptr) cudaStreamDestroy(stream);
}

absl::Status Synchronize(Stream stream) {
  return Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

absl::Status WaitEvent(Event event) {
  return Check(cudaEventSynchronize(event), "cudaEventSynchronize");
}

absl::StatusOr<bool> EventDone(Event event) {
  const cudaError_t rc = cudaEventQuery(event);
  if (rc == cudaSuccess) return true;
  if (rc == cudaErrorNotReady) return false;
  return Error(rc, "cudaEventQuery");
}

absl::StatusOr<Event> CreateEvent(bool timing) {
  cudaEvent_t e = nullptr;
  if (cudaError_t rc = cudaEventCreateWithFlags(
          &e, timing ? cudaEventDefault : cudaEventDisableTiming);
      rc != cudaSuccess) {
    return Error(rc, "cudaEventCreate");
  }
  return e;
}

void DestroyEvent(Event event) {
  if (event != nullptr) cudaEventDestroy(event);
}

absl::Status RecordEvent(Event event, Stream stream) {
  return Check(cudaEventRecord(event, stream), "cudaEventRecord");
}

absl::Status RecordEventInGraph(Event event, Stream stream) {
  // The external flag is legal only while the stream is captured; run
  // eagerly (generate --profile runs the decode program without a graph) it
  // is a plain record.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RETURN_IF_ERROR(Check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing"));
  if (capture != cudaStreamCaptureStatusActive) return RecordEvent(event, stream);
  return Check(cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal),
               "cudaEventRecordWithFlags");
}

absl::Status StreamWaitEvent(Stream stream, Event event) {
  return Check(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
}

absl::StatusOr<float> ElapsedMs(Event start, Event end) {
  float ms = 0;
  if (cudaError_t rc = cudaEventElapsedTime(&ms, start, end); rc != cudaSuccess) {
    return Error(rc, "cudaEventElapsedTime");
  }
  return ms;
}

absl::Status LastLaunchError(const char* what) {
  return Check(cudaGetLastError(), what);
}

Graph::~Graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    exec_ = std::exchange(other.exec_, nullptr);
    graph_ = std::exchange(other.graph_, nullptr);
    kernels_ = other.kernels_;
  }
  return *this;
}

absl::Status Graph::BeginCapture(Stream stream) {
  return Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture");
}

absl::StatusOr<Graph> Graph::EndCapture(Stream stream) {
  cudaGraph_t graph = nullptr;
  if (cudaError_t rc = cudaStreamEndCapture(stream, &graph); rc != cudaSuccess) {
    return Error(rc, "cudaStreamEndCapture");
  }
  // The kernels it launches, counted from the graph itself.
  int kernels = 0;
  size_t n_nodes = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n_nodes) == cudaSuccess && n_nodes > 0) {
    std::vector<cudaGraphNode_t> nodes(n_nodes);
    if (cudaGraphGetNodes(graph, nodes.data(), &n_nodes) == cudaSuccess) {
      for (cudaGraphNode_t n : nodes) {
        cudaGraphNodeType type;
        if (cudaGraphNodeGetType(n, &type) == cudaSuccess && type == cudaGraphNodeTypeKernel) {
          ++kernels;
        }
      }
    }
  }
  cudaGraphExec_t exec = nullptr;
  if (cudaError_t rc = cudaGraphInstantiate(&exec, graph, 0); rc != cudaSuccess) {
    cudaGraphDestroy(graph);
    return Error(rc, "cudaGraphInstantiate");
  }
  return Graph(graph, exec, kernels);
}

namespace {

// A kernel's name without its namespaces, parameters or template arguments.
std::string ShortKernelName(const void* func) {
  const char* mangled = nullptr;
  if (cudaFuncGetName(&mangled, func) != cudaSuccess || mangled == nullptr) return "?";
  int rc = 0;
  char* full = abi::__cxa_demangle(mangled, nullptr, nullptr, &rc);
  std::string name = rc == 0 && full != nullptr ? full : mangled;
  std::free(full);
  // Kernels in unnamed namespaces: drop that part before cutting.
  for (size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) {
    name.erase(at, 23);
  }
  // The name ends at its parameters or template arguments.
  name = name.substr(0, name.find_first_of("(<"));
  if (const size_t colon = name.rfind("::"); colon != std::string::npos) {
    name = name.substr(colon + 2);
  }
  return name;
}

// One kernel node's parameters as an instantiated graph of that node alone.
absl::StatusOr<cudaGraphExec_t> LoneKernel(const cudaKernelNodeParams& params) {
  cudaGraph_t g = nullptr;
  RETURN_IF_ERROR(Check(cudaGraphCreate(&g, 0), "cudaGraphCreate"));
  cudaGraphNode_t node = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t rc = cudaGraphAddKernelNode(&node, g, nullptr, 0, &params);
  if (rc == cudaSuccess) rc = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  if (rc != cudaSuccess) return Error(rc, "a lone kernel node");
  return exec;
}

}  // namespace

absl::StatusOr<double> Graph::TimeLaunches(Stream stream, int reps, void* flush,
                                           uint64_t flush_bytes) const {
  ASSIGN_OR_RETURN(Event start, CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(Event stop, CreateEvent(/*timing=*/true));
  std::vector<double> us;
  absl::Status status = absl::OkStatus();
  for (int r = 0; r < reps && status.ok(); ++r) {
    status = Memset(flush, r & 0xFF, flush_bytes, stream);
    if (status.ok()) status = RecordEvent(start, stream);
    if (status.ok()) status = Launch(stream);
    if (status.ok()) status = RecordEvent(stop, stream);
    if (status.ok()) status = Synchronize(stream);
    absl::StatusOr<float> ms = status.ok() ? ElapsedMs(start, stop)
                                           : absl::StatusOr<float>(status);
    if (!ms.ok()) status = ms.status();
    if (status.ok()) us.push_back(*ms * 1e3);
  }
  DestroyEvent(start);
  DestroyEvent(stop);
  RETURN_IF_ERROR(status);
  std::sort(us.begin(), us.end());
  return us.empty() ? 0.0 : us[us.size() / 2];
}

absl::StatusOr<std::vector<Graph::KernelTime>> Graph::TimeKernels(Stream stream, int reps,
                                                                  void* flush,
                                                                  uint64_t flush_bytes) const {
  if (graph_ == nullptr) return absl::FailedPreconditionError("TimeKernels: no captured graph");
  size_t n_nodes = 0;
  RETURN_IF_ERROR(Check(cudaGraphGetNodes(graph_, nullptr, &n_nodes), "cudaGraphGetNodes"));
  std::vector<cudaGraphNode_t> nodes(n_nodes);
  RETURN_IF_ERROR(Check(cudaGraphGetNodes(graph_, nodes.data(), &n_nodes), "cudaGraphGetNodes"));
  std::vector<KernelTime> out;
  for (cudaGraphNode_t n : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(n, &type) != cudaSuccess || type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams params{};
    RETURN_IF_ERROR(
        Check(cudaGraphKernelNodeGetParams(n, &params), "cudaGraphKernelNodeGetParams"));
    ASSIGN_OR_RETURN(cudaGraphExec_t exec, LoneKernel(params));
    const Graph lone(nullptr, exec, 1);  // destroys exec
    KernelTime t;
    ASSIGN_OR_RETURN(t.us, lone.TimeLaunches(stream, reps, flush, flush_bytes));
    t.name = ShortKernelName(params.func);
    t.grid[0] = params.gridDim.x;
    t.grid[1] = params.gridDim.y;
    t.grid[2] = params.gridDim.z;
    t.block = params.blockDim.x * params.blockDim.y * params.blockDim.z;
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status Graph::Launch(Stream stream) const {
  return Check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
}


}  // namespace sluice::cuda
