#include "model/routing_trace_recorder.h"

#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status RoutingTraceRecorder::Start(const ModelInfo& info) {
  absl::MutexLock lock(&mu_);
  if (writer_ != nullptr || closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": routing trace recorder started twice"));
  }
  memory::RoutingTraceHeader h;
  h.n_layer = static_cast<uint32_t>(info.n_layer);
  h.n_expert = static_cast<uint32_t>(info.n_expert);
  h.k = static_cast<uint32_t>(info.n_expert_used);
  auto w = memory::RoutingTraceWriter::Create(path_, h);
  if (!w.ok()) return w.status();
  writer_ = *std::move(w);
  next_token_.assign(h.n_layer, 0);
  return absl::OkStatus();
}

void RoutingTraceRecorder::OnRouting(int64_t layer, int64_t n_expert_used,
                                     absl::Span<const Routing> routes) {
  absl::MutexLock lock(&mu_);
  if (writer_ == nullptr || !error_.ok()) {
    dropped_ += routes.size();
    return;
  }
  if (layer < 0 || layer >= static_cast<int64_t>(next_token_.size())) {
    error_ = absl::InvalidArgumentError(absl::StrCat(
        path_, ": routing of layer ", layer, " but the model has ",
        next_token_.size(), " layers"));
    return;
  }
  if (n_expert_used < 1 || n_expert_used > kMaxExpertsUsed) {
    error_ = absl::InvalidArgumentError(absl::StrCat(
        path_, ": layer ", layer, " routed ", n_expert_used, " experts"));
    return;
  }
  for (const Routing& r : routes) {
    // The writer checks n_expert_used against the header's k.
    absl::Status s = writer_->Append(
        next_token_[layer], static_cast<uint32_t>(layer),
        absl::MakeConstSpan(r.expert, static_cast<size_t>(n_expert_used)));
    if (!s.ok()) {
      error_ = s;
      return;
    }
    ++next_token_[layer];
    ++records_;
  }
}

absl::Status RoutingTraceRecorder::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  if (writer_ != nullptr) {
    absl::Status s = writer_->Close();
    writer_ = nullptr;
    if (error_.ok()) error_ = s;
  }
  return error_;
}

uint64_t RoutingTraceRecorder::records() const {
  absl::MutexLock lock(&mu_);
  return records_;
}

uint64_t RoutingTraceRecorder::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace sluice
