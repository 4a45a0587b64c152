// The batch pass's supporting pieces (batch_pass.h): the section profiler,
// acquiring a layer's routed experts, the sequence tables, the group count
// and the kinds-apart switch. The pass itself is batch_pass.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/env_switch.h"
#include "base/status_macros.h"
#include "model/cuda/batch_pass.h"

namespace sluice {

PassProfiler::~PassProfiler() {
  for (cuda::Event e : events_) cuda::DestroyEvent(e);
}

void PassProfiler::Start(cuda::Stream stream) {
  if (!on_) return;
  marks_.clear();
  Mark("start", stream);
  marks_.clear();
  std::swap(events_[0], events_[1]);
}

void PassProfiler::Mark(const char* section, cuda::Stream stream) {
  if (!on_) return;
  while (marks_.size() + 2 > events_.size()) {
    auto e = cuda::CreateEvent(/*timing=*/true);
    if (!e.ok()) return;
    events_.push_back(*e);
  }
  cuda::RecordEvent(events_[marks_.size() + 1], stream).IgnoreError();
  marks_.push_back(section);
}

absl::Status PassProfiler::Collect(const char* phase, cuda::Stream stream) {
  if (!on_) return absl::OkStatus();
  RETURN_IF_ERROR(cuda::Synchronize(stream));
  const auto add = [&](const std::string& key, double v) {
    for (auto& [k, ms] : ms_) {
      if (k == key) {
        ms += v;
        return;
      }
    }
    ms_.push_back({key, v});
  };
  for (size_t i = 0; i < marks_.size(); ++i) {
    ASSIGN_OR_RETURN(const float ms, cuda::ElapsedMs(events_[i], events_[i + 1]));
    add(absl::StrCat(phase, ".", marks_[i]), ms);
  }
  add(absl::StrCat(phase, ".calls"), 1);
  marks_.clear();
  return absl::OkStatus();
}

// One token's routing in host_routing (k ids, then k weights): its cold
// experts skipped by model/expert_skip.h's rule with the stream's
// residency; the kept weights rescaled there and copied to the device's
// weights (the combine reads them after this, in stream order), the
// skipped ids into *skipped.
absl::Status SkipRouted(const BatchContext& c, int stream_layer, std::vector<int32_t>* skipped) {
  const int k = static_cast<int>(c.desc->moe.n_expert_used);
  const int32_t* ids = c.host_routing;
  float* weights = reinterpret_cast<float*>(c.host_routing + k);
  const StreamResidency residency(*c.experts);
  if (SkipColdExpertsOfToken(stream_layer, c.desc->moe.n_expert, k, c.skip_threshold, residency,
                             ids, weights, skipped) == 0) {
    return absl::OkStatus();
  }
  return cuda::CopyToDevice(c.ws->weights, weights, k * sizeof(float), c.stream);
}

absl::Status AcquireRouted(const BatchContext& c, int il, int64_t n_tok,
                           const std::vector<int32_t>& begin, bool prefetch,
                           std::vector<HostExpert>* on_host,
                           std::vector<int32_t>* pending) {
  const int k = static_cast<int>(c.desc->moe.n_expert_used);
  const int n_expert = static_cast<int>(c.desc->moe.n_expert);
  const int32_t* ids = c.host_routing;
  if (c.observer != nullptr) {
    const float* weights = reinterpret_cast<const float*>(ids + n_tok * k);
    std::vector<Routing> routes(n_tok);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int j = 0; j < k; ++j) {
        routes[t].expert[j] = ids[t * k + j];
        routes[t].weight[j] = weights[t * k + j];
      }
    }
    c.observer->OnRouting(il, k, routes);
  }
  if (c.experts == nullptr) return absl::OkStatus();
  const std::vector<DeviceLayer>& layers = *c.layers;
  std::vector<int32_t> used, skipped;
  std::vector<int> slot_of;  // one token: the routing slot of used[i]
  if (begin.empty()) {
    // One token: k distinct experts, less those it skips.
    if (c.skip_threshold > 0 && n_tok == 1) {
      RETURN_IF_ERROR(SkipRouted(c, layers[il].moe.stream_layer, &skipped));
    }
    for (int j = 0; j < k; ++j) {
      if (std::find(skipped.begin(), skipped.end(), ids[j]) == skipped.end()) {
        used.push_back(ids[j]);
        slot_of.push_back(j);
      }
    }
  } else {
    for (int x = 0; x < n_expert; ++x) {
      if (begin[x + 1] > begin[x]) used.push_back(x);
    }
  }
  // The stream knows only the blocks with routed experts.
  RETURN_IF_ERROR(c.experts->Acquire(layers[il].moe.stream_layer, used, c.stream, on_host,
                                     pending, skipped));
  // The host's results go to their routing slots (HostExpert::index counts
  // positions in `used`, which skipped experts left).
  if (on_host != nullptr && !skipped.empty()) {
    for (HostExpert& h : *on_host) h.index = slot_of[h.index];
  }
  if (prefetch && il + 1 < static_cast<int>(layers.size()) &&
      layers[il + 1].moe.stream_layer >= 0) {
    RETURN_IF_ERROR(c.experts->Prefetch(layers[il + 1].moe.stream_layer,
                                        absl::MakeConstSpan(ids + 2 * k, k), c.stream));
  }
  return absl::OkStatus();
}

namespace {
EnvSwitch split_kinds("SLUICE_CUDA_SPLIT_KINDS", true);
EnvSwitch overlap_misses("SLUICE_CUDA_OVERLAP_MISSES", false);
EnvSwitch wide_batch_graphs("SLUICE_CUDA_WIDE_BATCH_GRAPHS", false);
}  // namespace

bool OverlapMissesEnabled() { return overlap_misses.on(); }

int OverlapSlots(absl::Span<const int32_t> ids, absl::Span<const int32_t> pending,
                 int n_expert, int32_t* out) {
  const int k = static_cast<int>(ids.size());
  const auto is_pending = [&](int32_t e) {
    return std::find(pending.begin(), pending.end(), e) != pending.end();
  };
  std::vector<int> order;
  order.reserve(k);
  for (int s = 0; s < k; ++s) {
    if (!is_pending(ids[s])) order.push_back(s);
  }
  const int in_place = static_cast<int>(order.size());
  for (int s = 0; s < k; ++s) {
    if (is_pending(ids[s])) order.push_back(s);
  }
  for (int i = 0; i < k; ++i) out[i] = ids[order[i]];
  int at = k;
  for (const auto& [first, count] : {std::pair{0, in_place}, std::pair{in_place, k - in_place}}) {
    for (int i = first; i < first + count; ++i) out[at++] = out[i];
    for (int i = first; i < first + count; ++i) out[at++] = out[i] + n_expert;
  }
  for (int i = 0; i < k; ++i) out[3 * k + order[i]] = i;
  return in_place;
}

void SetOverlapMissesEnabled(bool enabled) { overlap_misses.Set(enabled); }

bool SplitKindsEnabled() { return split_kinds.on(); }

void SetSplitKindsEnabled(bool enabled) { split_kinds.Set(enabled); }

bool WideBatchGraphsEnabled() { return wide_batch_graphs.on(); }

void SetWideBatchGraphsEnabled(bool enabled) { wide_batch_graphs.Set(enabled); }

absl::Status UploadSequences(const BatchContext& c, int64_t n_tok,
                             absl::Span<const PassSequence> seqs) {
  const int n_seqs = static_cast<int>(seqs.size());
  const int n_layers = static_cast<int>(c.layers->size());
  const Workspace& w = *c.ws;
  std::vector<cuda::SeqRows> rows(n_seqs);
  std::vector<int32_t> row_seq(n_tok);
  std::vector<cuda::SeqState> states(static_cast<size_t>(n_layers) * n_seqs);
  for (int i = 0; i < n_seqs; ++i) {
    const PassSequence& s = seqs[i];
    rows[i] = {static_cast<int32_t>(s.row), static_cast<int32_t>(s.n), s.pos0, 0};
    std::fill(row_seq.begin() + s.row, row_seq.begin() + s.row + s.n, i);
    for (int il = 0; il < n_layers; ++il) {
      // Attention and latent attention: the caches (v null for a latent).
      const bool kv = (*c.layers)[il].mixer != MixerKind::kDeltaNet;
      DeviceState& st = *s.state;
      states[static_cast<size_t>(il) * n_seqs + i] =
          kv ? cuda::SeqState{st.k(il), st.v(il)} : cuda::SeqState{st.conv(il), st.ssm(il)};
    }
  }
  RETURN_IF_ERROR(
      cuda::CopyToDevice(w.seq_rows, rows.data(), rows.size() * sizeof(rows[0]), c.stream));
  RETURN_IF_ERROR(cuda::CopyToDevice(w.row_seq, row_seq.data(), row_seq.size() * sizeof(int32_t),
                                     c.stream));
  return cuda::CopyToDevice(w.seq_states, states.data(), states.size() * sizeof(states[0]),
                            c.stream);
}

GroupSizes SizesOf(const int32_t* bounds, int64_t n_expert) {
  GroupSizes g;
  for (int64_t x = 0; x < n_expert; ++x) {
    const int32_t size = bounds[x + 1] - bounds[x];
    g.largest = std::max(g.largest, size);
    g.used += size > 0 ? 1 : 0;
  }
  return g;
}

}  // namespace sluice
