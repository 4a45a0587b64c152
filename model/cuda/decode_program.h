// One decode step as data: an ordered list of device ops (each enqueues a
// few kernels or copies on the stream) and host actions between them (read
// a layer's routing back and acquire its experts; compute the host's share
// of the misses). One runner executes it in every mode, so capture and
// replay cannot disagree:
//
//   eager      every op is enqueued and every host action runs in order
//              (profiling, debugging);
//   graph      the first run captures the ops between two host actions as
//              one CUDA graph segment (launched at once), later runs replay
//              the segments with the host actions in between.
//
// A program is built once per sequence state and variant (its ops hold the
// state's device pointers) and counts its own launches from the captured
// graphs. TimeOps replays every op alone, with the L2 cache flushed in
// between, and reports its time, the bytes it reads and the rate.
//
// Thread-safety: none; the model runs one step at a time.
#ifndef SLUICE_MODEL_CUDA_DECODE_PROGRAM_H_
#define SLUICE_MODEL_CUDA_DECODE_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/device.h"
#include "model/model.h"

namespace sluice {

// What the host does at a cut.
struct HostAction {
  enum Kind {
    kRouting,      // wait for layer `layer`'s routing, acquire its experts
    kHostExperts,  // compute layer `layer`'s host share of the misses
  };
  Kind kind = kRouting;
  int layer = 0;
};

// One device op and what it costs.
struct DecodeOp {
  std::string label;   // "<layer>.<part>", e.g. "3.delta.in"
  uint64_t bytes = 0;  // weight and cache bytes it reads
  // Enqueues the op on the stream; returns the launch error, if any.
  std::function<absl::Status(cuda::Stream)> enqueue;
};

struct OpTiming {
  std::string label;
  uint64_t bytes = 0;
  int kernels = 0;
  double us = 0;  // median over the replays
  double gb_per_s() const { return us > 0 ? bytes / (us * 1e3) : 0; }
};

class DecodeProgram {
 public:
  // Runs the program's host actions (the model).
  class Host {
   public:
    virtual ~Host() = default;
    virtual absl::Status Run(const HostAction& action) = 0;
  };

  void Add(DecodeOp op);
  void Cut(HostAction action);

  // One step. With `graph` false, eagerly; else captured at the first call
  // and replayed after. A failed capture leaves the program uncaptured.
  // A replayed step adds its host times to `times` when given (all but
  // routing_wait_s, which the host counts itself).
  absl::Status Run(cuda::Stream stream, bool graph, Host& host,
                   DecodeHostTimes* times = nullptr);

  // Kernel launches per step, counted from the captured segments (0 before
  // the first graph run).
  int launches() const { return launches_; }
  int segments() const { return static_cast<int>(segments_.size()); }
  bool captured() const { return !graphs_.empty(); }

  // Every op alone, `reps` times (median), the L2 flushed before each by
  // writing `flush` (a device buffer larger than L2). The state the ops
  // act on is garbage afterwards.
  absl::StatusOr<std::vector<OpTiming>> TimeOps(cuda::Stream stream, int reps,
                                                void* flush,
                                                uint64_t flush_bytes) const;

 private:
  struct Segment {
    std::vector<DecodeOp> ops;
    std::optional<HostAction> after;
  };
  absl::Status Capture(cuda::Stream stream, Host& host);

  std::vector<Segment> segments_{1};
  std::vector<cuda::Graph> graphs_;
  int launches_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_MODEL_CUDA_DECODE_PROGRAM_H_
