#include "model/cuda/decode_program.h"

#include <chrono>
#include <utility>

#include "base/status_macros.h"

namespace sluice {

void DecodeProgram::Add(DecodeOp op) {
  segments_.back().ops.push_back(std::move(op));
}

void DecodeProgram::Cut(HostAction action) {
  segments_.back().after = action;
  segments_.emplace_back();
}

absl::Status DecodeProgram::Run(cuda::Stream stream, bool graph, Host& host,
                                DecodeHostTimes* times) {
  if (graph && graphs_.empty()) return Capture(stream, host);
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  DecodeHostTimes t;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    const Clock::time_point t0 = Clock::now();
    if (graph) {
      RETURN_IF_ERROR(graphs_[i].Launch(stream));
    } else {
      for (const DecodeOp& op : s.ops) RETURN_IF_ERROR(op.enqueue(stream));
    }
    const Clock::time_point t1 = Clock::now();
    t.launch_s += seconds(t0, t1);
    if (!s.after.has_value()) continue;
    RETURN_IF_ERROR(host.Run(*s.after));
    (s.after->kind == HostAction::kRouting ? t.routing_s : t.host_experts_s) +=
        seconds(t1, Clock::now());
  }
  if (times != nullptr) {
    ++times->steps;
    times->step_s += seconds(start, Clock::now());
    times->launch_s += t.launch_s;
    times->routing_s += t.routing_s;
    times->host_experts_s += t.host_experts_s;
  }
  return absl::OkStatus();
}

absl::Status DecodeProgram::Capture(cuda::Stream stream, Host& host) {
  // Each segment is launched as soon as it is captured, so this first run
  // computes the step like every later one.
  std::vector<cuda::Graph> graphs;
  int launches = 0;
  for (const Segment& s : segments_) {
    RETURN_IF_ERROR(cuda::Graph::BeginCapture(stream));
    absl::Status body = absl::OkStatus();
    for (const DecodeOp& op : s.ops) {
      body = op.enqueue(stream);
      if (!body.ok()) break;
    }
    absl::StatusOr<cuda::Graph> g = cuda::Graph::EndCapture(stream);
    RETURN_IF_ERROR(body);
    RETURN_IF_ERROR(g.status());
    RETURN_IF_ERROR(g->Launch(stream));
    launches += g->kernels();
    graphs.push_back(*std::move(g));
    if (s.after.has_value()) RETURN_IF_ERROR(host.Run(*s.after));
  }
  graphs_ = std::move(graphs);
  launches_ = launches;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OpTiming>> DecodeProgram::TimeOps(
    cuda::Stream stream, int reps, void* flush, uint64_t flush_bytes) const {
  std::vector<OpTiming> out;
  for (const Segment& s : segments_) {
    for (const DecodeOp& op : s.ops) {
      RETURN_IF_ERROR(cuda::Graph::BeginCapture(stream));
      absl::Status body = op.enqueue(stream);
      absl::StatusOr<cuda::Graph> g = cuda::Graph::EndCapture(stream);
      RETURN_IF_ERROR(body);
      RETURN_IF_ERROR(g.status());
      ASSIGN_OR_RETURN(const double us, g->TimeLaunches(stream, reps, flush, flush_bytes));
      out.push_back({op.label, op.bytes, g->kernels(), us});
    }
  }
  return out;
}

}  // namespace sluice
