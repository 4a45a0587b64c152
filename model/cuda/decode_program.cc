#include "model/cuda/decode_program.h"

#include <algorithm>
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

absl::Status DecodeProgram::Run(cuda::Stream stream, bool graph, Host& host) {
  if (graph && graphs_.empty()) return Capture(stream, host);
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    if (graph) {
      RETURN_IF_ERROR(graphs_[i].Launch(stream));
    } else {
      for (const DecodeOp& op : s.ops) RETURN_IF_ERROR(op.enqueue(stream));
    }
    if (s.after.has_value()) RETURN_IF_ERROR(host.Run(*s.after));
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
  ASSIGN_OR_RETURN(cuda::Event start, cuda::CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(cuda::Event stop, cuda::CreateEvent(/*timing=*/true));
  std::vector<OpTiming> out;
  absl::Status status = absl::OkStatus();
  for (const Segment& s : segments_) {
    for (const DecodeOp& op : s.ops) {
      RETURN_IF_ERROR(cuda::Graph::BeginCapture(stream));
      absl::Status body = op.enqueue(stream);
      absl::StatusOr<cuda::Graph> g = cuda::Graph::EndCapture(stream);
      if (!body.ok() || !g.ok()) {
        status = body.ok() ? g.status() : body;
        break;
      }
      std::vector<double> us;
      for (int r = 0; r < reps && status.ok(); ++r) {
        status = cuda::Memset(flush, r & 0xFF, flush_bytes, stream);
        if (status.ok()) status = cuda::RecordEvent(start, stream);
        if (status.ok()) status = g->Launch(stream);
        if (status.ok()) status = cuda::RecordEvent(stop, stream);
        if (status.ok()) status = cuda::Synchronize(stream);
        absl::StatusOr<float> ms = status.ok() ? cuda::ElapsedMs(start, stop)
                                               : absl::StatusOr<float>(status);
        if (!ms.ok()) status = ms.status();
        if (status.ok()) us.push_back(*ms * 1e3);
      }
      if (!status.ok()) break;
      std::sort(us.begin(), us.end());
      out.push_back({op.label, op.bytes, g->kernels(), us.empty() ? 0 : us[us.size() / 2]});
    }
    if (!status.ok()) break;
  }
  cuda::DestroyEvent(start);
  cuda::DestroyEvent(stop);
  RETURN_IF_ERROR(status);
  return out;
}

}  // namespace sluice
