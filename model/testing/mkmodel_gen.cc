// The value generator (seekable, so chunks can be drawn on any thread), the
// routing-locality transform and the parallel, streaming tensor writer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quantize.h"
#include "model/testing/mkmodel_internal.h"

namespace sluice::mkmodel::internal {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64(uint64_t& state) { return Mix64(state += kGamma); }

// Standard normals from splitmix64 + Box-Muller, computed in double. Draw n
// uses the generator's calls 2*(n/2) and 2*(n/2)+1; splitmix64's state after
// c calls is seed + c * gamma, so Seek jumps anywhere in O(1).
class Normal {
 public:
  explicit Normal(uint64_t seed) : seed_(seed), state_(seed) {}
  // The next Next() returns draw n.
  void Seek(uint64_t n) {
    state_ = seed_ + (n / 2) * 2 * kGamma;
    has_spare_ = false;
    if (n % 2 == 1) Next();
  }
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(SplitMix64(state_) >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(SplitMix64(state_) >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t seed_;
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Approximate standard normals for the mixes (large benchmark models),
// about 20x cheaper than Normal: the Irwin-Hall sum of four 16-bit uniforms
// from one splitmix64 output, centred and scaled to unit variance (tails cut
// at +-3.46). Draw n uses generator call n, so Seek is O(1) too.
class FastNormal {
 public:
  explicit FastNormal(uint64_t seed) : seed_(seed), state_(seed) {}
  void Seek(uint64_t n) { state_ = seed_ + n * kGamma; }
  float Next() {
    const uint64_t z = SplitMix64(state_);
    const uint32_t sum = static_cast<uint32_t>(z & 0xFFFF) + ((z >> 16) & 0xFFFF) +
                         ((z >> 32) & 0xFFFF) + (z >> 48);
    // (k + 0.5) / 65536 is uniform on (0, 1) with mean 1/2; four have
    // variance 1/3.
    return (static_cast<float>(sum) * 0x1p-16f - 1.99993896484375f) * 1.7320508f;
  }

 private:
  uint64_t seed_;
  uint64_t state_;
};

uint64_t TensorSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  uint64_t s = seed ^ h;
  return SplitMix64(s);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Routing locality (docs/BENCHMARKS.md, "Routing locality"). Every token
// embedding gets a shared direction u (|u|^2 = n_embd) added, so after
// RMSNorm a hidden state x has x.u ~ n_embd / sqrt(2) on top of its random
// part; each router row e gets c_e u added with c_e chosen so that this
// shared part contributes the logit bias -S ln(1 + rank_e), rank_e a
// per-layer random permutation of the experts. A softmax over such biases
// alone gives expert popularity proportional to (1 + rank)^-S: Zipf-like.
constexpr double kEmbedShare = 1.0;  // the weight of u in every embedding

std::vector<double> LocalityDirection(const Options& o, uint64_t n) {
  Normal normal(TensorSeed(o.seed, "#locality_direction"));
  std::vector<double> u(n);
  double sq = 0;
  for (double& v : u) {
    v = normal.Next();
    sq += v * v;
  }
  for (double& v : u) v *= std::sqrt(static_cast<double>(n) / sq);
  return u;
}

// rank[e] for the experts of one router (Fisher-Yates from the name's seed).
std::vector<uint64_t> ExpertRanks(const Options& o, const Spec& spec, uint64_t n_expert) {
  std::vector<uint64_t> order(n_expert);
  for (uint64_t i = 0; i < n_expert; ++i) order[i] = i;
  uint64_t state = TensorSeed(o.seed, spec.name + "#locality_rank");
  for (uint64_t i = n_expert; i > 1; --i) std::swap(order[i - 1], order[SplitMix64(state) % i]);
  std::vector<uint64_t> rank(n_expert);
  for (uint64_t r = 0; r < n_expert; ++r) rank[order[r]] = r;
  return rank;
}

void ApplyLocality(const Options& o, const Spec& spec, uint64_t first_row, uint64_t n_rows,
                   std::vector<float>& out) {
  const bool embd = spec.name == "token_embd.weight";
  const bool router = EndsWith(spec.name, ".ffn_gate_inp.weight");
  if (o.routing_locality <= 0 || (!embd && !router)) return;
  const uint64_t n = spec.ne[0];
  const std::vector<double> u = LocalityDirection(o, n);
  std::vector<uint64_t> rank;
  if (router) rank = ExpertRanks(o, spec, spec.ne[1]);
  // x.u = kEmbedShare * n / sqrt(1 + kEmbedShare^2) after the norm.
  const double per_bias = std::sqrt(1 + kEmbedShare * kEmbedShare) / (kEmbedShare * n);
  for (uint64_t r = 0; r < n_rows; ++r) {
    double c = kEmbedShare;
    if (router) {
      const double bias = -o.routing_locality * std::log1p(static_cast<double>(rank[first_row + r]));
      c = bias * per_bias;
    }
    float* row = out.data() + r * n;
    for (uint64_t i = 0; i < n; ++i) row[i] = static_cast<float>(row[i] + c * u[i]);
  }
}

}  // namespace

absl::Status Encode(const std::vector<float>& values, GgmlType type, std::vector<uint8_t>& out) {
  if (type == GgmlType::kQ8_0) {
    out.clear();
    QuantizeQ8_0(values.data(), values.size(), out);
  } else if (type == GgmlType::kF16) {
    out.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = FloatToHalf(values[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  } else if (type == GgmlType::kF32) {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
  } else {
    const int64_t n = static_cast<int64_t>(values.size());
    ASSIGN_OR_RETURN(const int64_t bytes, kernels::RowBytes(type, n));
    out.resize(bytes);
    RETURN_IF_ERROR(kernels::QuantizeRow(type, values.data(), n, out.data()));
  }
  return absl::OkStatus();
}

namespace {

// DrawRows for the mixes: FastNormal, computed in float.
void DrawRowsFast(const Options& o, const Spec& spec, uint64_t first_row, uint64_t n_rows,
                  std::vector<float>& out) {
  const uint64_t row = spec.ne[0];
  FastNormal normal(TensorSeed(o.seed, spec.name));
  FastNormal row_gain(TensorSeed(o.seed, spec.name + "#row_gain"));
  normal.Seek(first_row * row);
  row_gain.Seek(first_row);
  out.resize(n_rows * row);
  const float inv_sqrt = static_cast<float>(1.0 / std::sqrt(static_cast<double>(row)));
  for (uint64_t r = 0; r < n_rows; ++r) {
    float* y = out.data() + r * row;
    if (spec.init == Init::kSsmA) {
      for (uint64_t i = 0; i < row; ++i) y[i] = -std::exp(0.5f * normal.Next());
      continue;
    }
    // Every other init is a * z + b.
    float a = 1.0f, b = 0.0f;
    switch (spec.init) {
      case Init::kMatrix: a = inv_sqrt * spec.scale; break;
      case Init::kEmbedding: break;
      case Init::kOutput: a = inv_sqrt * std::exp(0.5f * row_gain.Next()); break;
      case Init::kNorm: a = 0.05f, b = 1.0f; break;
      case Init::kDtBias: a = 0.5f, b = -2.0f; break;
      case Init::kBias: a = 0.1f; break;
      case Init::kSsmA:
      case Init::kFusedKvB: break;
    }
    for (uint64_t i = 0; i < row; ++i) y[i] = a * normal.Next() + b;
  }
}

}  // namespace

uint64_t Rows(const Spec& spec) {
  uint64_t rows = 1;
  for (size_t d = 1; d < spec.ne.size(); ++d) rows *= spec.ne[d];
  return rows;
}

namespace {

// Rows of deepseek2's fused attn_kv_b from the split tensors' draws: per
// head, K_b transposed (nope rows of kv_lora_rank) then V_b (v rows).
void DrawFusedKvB(const Options& o, const Spec& spec, uint64_t first_row,
                  uint64_t n_rows, std::vector<float>& out) {
  const ModelShape& s = o.shape;
  const uint64_t lat = s.kv_lora_rank, h = s.n_head, dv = s.v_head_dim;
  const uint64_t nope = s.head_dim - s.rope_dims;
  const std::string prefix = spec.name.substr(0, spec.name.size() - strlen("attn_kv_b.weight"));
  const Spec k{prefix + "attn_k_b.weight", {nope, lat, h}, Init::kMatrix, 1.0f, true};
  const Spec v{prefix + "attn_v_b.weight", {lat, dv, h}, Init::kMatrix, 1.0f, true};
  std::vector<float> kv, vv;
  DrawRows(o, k, 0, Rows(k), kv);
  DrawRows(o, v, 0, Rows(v), vv);
  out.resize(n_rows * lat);
  for (uint64_t r = 0; r < n_rows; ++r) {
    const uint64_t row = first_row + r, head = row / (nope + dv), j = row % (nope + dv);
    float* y = out.data() + r * lat;
    for (uint64_t c = 0; c < lat; ++c) {
      y[c] = j < nope ? kv[(head * lat + c) * nope + j] : vv[(head * dv + (j - nope)) * lat + c];
    }
  }
}

}  // namespace

void DrawRows(const Options& o, const Spec& spec, uint64_t first_row, uint64_t n_rows,
              std::vector<float>& out) {
  if (spec.init == Init::kFusedKvB) {
    DrawFusedKvB(o, spec, first_row, n_rows, out);
    return;
  }
  if (o.mix != Mix::kNone) {
    DrawRowsFast(o, spec, first_row, n_rows, out);
    ApplyLocality(o, spec, first_row, n_rows, out);
    return;
  }
  const uint64_t row = spec.ne[0];
  Normal normal(TensorSeed(o.seed, spec.name));
  Normal row_gain(TensorSeed(o.seed, spec.name + "#row_gain"));
  normal.Seek(first_row * row);
  row_gain.Seek(first_row);
  out.resize(n_rows * row);
  const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(row));
  for (uint64_t r = 0; r < n_rows; ++r) {
    const double gain =
        spec.init == Init::kOutput ? std::exp(0.5 * row_gain.Next()) : 1.0;
    for (uint64_t i = 0; i < row; ++i) {
      const double z = normal.Next();
      double v = 0;
      switch (spec.init) {
        case Init::kMatrix: v = z * inv_sqrt * spec.scale; break;
        case Init::kEmbedding: v = z; break;
        case Init::kOutput: v = z * inv_sqrt * gain; break;
        case Init::kNorm: v = 1.0 + 0.05 * z; break;
        case Init::kSsmA: v = -std::exp(0.5 * z); break;
        case Init::kDtBias: v = -2.0 + 0.5 * z; break;
        case Init::kBias: v = 0.1 * z; break;
        case Init::kFusedKvB: break;
      }
      out[r * row + i] = static_cast<float>(v);
    }
  }
  ApplyLocality(o, spec, first_row, n_rows, out);
}

absl::Status WriteTensorData(const Options& o, const Spec& spec, GgufWriter& w,
                             std::vector<ChunkSlot>& slots) {
  const uint64_t total = Rows(spec);
  const uint64_t rows_per_chunk = std::max<uint64_t>(1, o.chunk_elements / spec.ne[0]);
  const uint64_t n_chunks = (total + rows_per_chunk - 1) / rows_per_chunk;
  const uint64_t threads = std::min<uint64_t>(
      n_chunks, o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency()));
  auto fill = [&](uint64_t chunk, ChunkSlot& slot) {
    const uint64_t first = chunk * rows_per_chunk;
    DrawRows(o, spec, first, std::min(rows_per_chunk, total - first), slot.values);
    slot.status = Encode(slot.values, spec.type, slot.bytes);
  };
  // Two sets of `threads` slots: workers fill one batch while this thread
  // writes the previous one, so memory stays at 2 * threads chunks.
  if (slots.size() < 2 * threads) slots.resize(2 * threads);
  auto write = [&](size_t set, uint64_t count) -> absl::Status {
    for (uint64_t i = 0; i < count; ++i) {
      ChunkSlot& s = slots[set * threads + i];
      RETURN_IF_ERROR(s.status);
      RETURN_IF_ERROR(w.AppendTensorData(s.bytes));
    }
    return absl::OkStatus();
  };
  size_t prev_set = 1;
  uint64_t prev_count = 0;
  for (uint64_t first = 0; first < n_chunks; first += threads) {
    const uint64_t count = std::min(threads, n_chunks - first);
    const size_t set = 1 - prev_set;
    std::vector<std::thread> workers;
    if (count == 1) {
      fill(first, slots[set * threads]);  // small tensors: no thread
    } else {
      for (uint64_t i = 0; i < count; ++i) {
        workers.emplace_back(fill, first + i, std::ref(slots[set * threads + i]));
      }
    }
    absl::Status written = write(prev_set, prev_count);
    for (std::thread& t : workers) t.join();
    RETURN_IF_ERROR(written);
    prev_set = set;
    prev_count = count;
  }
  return write(prev_set, prev_count);
}

}  // namespace sluice::mkmodel::internal
