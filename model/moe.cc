#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/status_macros.h"
#include "model/blocks.h"

namespace sluice {
namespace {

// ggml clamps the sum of the selected weights from below before dividing.
constexpr float kMinWeightSum = 6.103515625e-5f;

// silu(g) * u in place into g, n elements.
void GateMul(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = Silu(g[i]) * u[i];
}

// down(silu(gate x) * up x) for m rows x [m][n_embd] -> y [m][n_embd]; x is
// converted once for gate and up.
absl::Status SwiGlu(const Matrix& gate, const Matrix& up, const Matrix& down,
                    const float* x, int64_t m, float* y,
                    std::vector<float>& g_buf, std::vector<float>& u_buf,
                    ThreadPool* pool) {
  const int64_t ff = gate.rows;
  g_buf.resize(m * ff);
  u_buf.resize(m * ff);
  const Matrix* ws[] = {&gate, &up};
  float* ys[] = {g_buf.data(), u_buf.data()};
  RETURN_IF_ERROR(ProjectShared(ws, x, m, ys, pool));
  GateMul(g_buf.data(), u_buf.data(), m * ff);
  return Project(down, g_buf.data(), m, y, pool);
}

struct ExpertScratch {
  std::vector<int64_t> tokens;
  kernels::PreparedActivations act;
  std::vector<float> x, y, g, u;
};

// Expert e applied to the tokens routed to it (`list`: (token, slot)
// pairs); each result, scaled by its routing weight, goes to its slot row
// of slot_out ([n_tok][k][n_embd]). x_act holds every token's input
// prepared for the gate weights' type; its rows are gathered, not
// converted again per expert.
absl::Status RunExpert(const ExpertWeights& w, int32_t e,
                       const std::vector<std::pair<int64_t, int64_t>>& list,
                       absl::Span<const Routing> routes, const float* x,
                       const kernels::PreparedActivations& x_act,
                       int64_t e_dim, int64_t k, ExpertScratch& s,
                       float* slot_out, ThreadPool* pool) {
  const int64_t m = static_cast<int64_t>(list.size());
  const Matrix& gate = w.gate;
  const Matrix& up = w.up;
  const int64_t ff = gate.rows;
  s.tokens.clear();
  for (const auto& [t, slot] : list) s.tokens.push_back(t);
  s.act.Gather(x_act, s.tokens);
  s.g.resize(m * ff);
  s.u.resize(m * ff);
  s.y.resize(m * e_dim);
  RETURN_IF_ERROR(ProjectPrepared(gate, s.act, s.g.data(), pool));
  if (s.act.CompatibleWith(up.type, up.cols)) {
    RETURN_IF_ERROR(ProjectPrepared(up, s.act, s.u.data(), pool));
  } else {
    s.x.resize(m * e_dim);
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(s.x.data() + i * e_dim, x + s.tokens[i] * e_dim,
                  e_dim * sizeof(float));
    }
    RETURN_IF_ERROR(Project(up, s.x.data(), m, s.u.data(), pool));
  }
  GateMul(s.g.data(), s.u.data(), m * ff);
  RETURN_IF_ERROR(Project(w.down, s.g.data(), m, s.y.data(), pool));
  for (int64_t i = 0; i < m; ++i) {
    const auto [t, slot] = list[i];
    const float wt = routes[t].weight[slot];
    float* dst = slot_out + (t * k + slot) * e_dim;
    const float* src = s.y.data() + i * e_dim;
    for (int64_t j = 0; j < e_dim; ++j) dst[j] = src[j] * wt;
  }
  return absl::OkStatus();
}

// slots[e] lists the (token, slot) pairs sent to expert e in token order,
// `active` the experts with at least one.
void GroupByExpert(const MoeConfig& c, absl::Span<const Routing> routes,
                   std::vector<std::vector<std::pair<int64_t, int64_t>>>& slots,
                   std::vector<int32_t>& active) {
  slots.assign(c.n_expert, {});
  for (int64_t t = 0; t < static_cast<int64_t>(routes.size()); ++t) {
    for (int64_t s = 0; s < c.n_expert_used; ++s) {
      // A skipped slot's row of slot_out stays zero.
      if (routes[t].expert[s] == kSkippedExpert) continue;
      slots[routes[t].expert[s]].push_back({t, s});
    }
  }
  active.clear();
  for (int64_t e = 0; e < c.n_expert; ++e) {
    if (!slots[e].empty()) active.push_back(static_cast<int32_t>(e));
  }
}

// out[t] += sigmoid(w_shexp_gate . x[t]) * SwiGLU_shared(x[t]) (the gate is
// 1 without shared_gate_inp).
absl::Status AddSharedExpert(const MoeWeights& w, int64_t e_dim,
                             const float* x, int64_t n_tok, float* out,
                             ThreadPool* pool) {
  std::vector<float> shared(n_tok * e_dim), g_buf, u_buf;
  RETURN_IF_ERROR(SwiGlu(w.shared_gate, w.shared_up, w.shared_down, x, n_tok,
                         shared.data(), g_buf, u_buf, pool));
  for (int64_t t = 0; t < n_tok; ++t) {
    const float gate = w.shared_gate_inp == nullptr
                           ? 1.0f
                           : Sigmoid(Dot(w.shared_gate_inp, x + t * e_dim, e_dim));
    for (int64_t j = 0; j < e_dim; ++j) {
      out[t * e_dim + j] += shared[t * e_dim + j] * gate;
    }
  }
  return absl::OkStatus();
}

// The single-token step: every chosen expert and the shared one through
// ExpertsOneToken (two parallel loops), then the weighted sum in slot order.
absl::Status MoeOneToken(const MoeConfig& c, const MoeWeights& w,
                         const Routing& r,
                         absl::Span<const ExpertWeights> experts,
                         const float* x, float* out,
                         ThreadPool* pool) {
  const int64_t k = c.n_expert_used, e_dim = c.n_embd;
  const bool shared = c.shared_ff > 0;
  std::vector<ExpertWeights> chosen;
  // row[s]: slot s's row of y; -1 for a skipped slot (nothing computed).
  int64_t row[kMaxExpertsUsed];
  for (int64_t s = 0; s < k; ++s) {
    row[s] = r.expert[s] == kSkippedExpert ? -1 : static_cast<int64_t>(chosen.size());
    if (row[s] >= 0) chosen.push_back(experts[r.expert[s]]);
  }
  const int64_t shared_row = static_cast<int64_t>(chosen.size());
  if (shared) chosen.push_back({w.shared_gate, w.shared_up, w.shared_down});
  std::vector<float> y(chosen.size() * e_dim);
  RETURN_IF_ERROR(ExpertsOneToken(chosen, x, y.data(), pool));
  // Slot order and the first slot's assignment as without skipping, so
  // that a token with nothing skipped sums bit for bit as before.
  std::fill(out, out + e_dim, 0.0f);
  bool first = true;
  for (int64_t s = 0; s < k; ++s) {
    if (row[s] < 0) continue;
    const float* ys = y.data() + row[s] * e_dim;
    if (first) {
      for (int64_t j = 0; j < e_dim; ++j) out[j] = ys[j] * r.weight[s];
    } else {
      for (int64_t j = 0; j < e_dim; ++j) out[j] += ys[j] * r.weight[s];
    }
    first = false;
  }
  if (shared) {
    const float gate = w.shared_gate_inp == nullptr
                           ? 1.0f
                           : Sigmoid(Dot(w.shared_gate_inp, x, e_dim));
    for (int64_t j = 0; j < e_dim; ++j) out[j] += y[shared_row * e_dim + j] * gate;
  }
  return absl::OkStatus();
}

// Router logits [n_tok][n_expert]. F32 routers (all golden models) are
// summed in ggml's order: a logit that rounds differently can pick another
// expert, and with ggml's order the routing, hence the whole output, of
// qwen3moe-tiny-q8_0 is llama.cpp's bit for bit.
absl::Status RouterLogits(const Matrix& router, const float* x, int64_t n_tok,
                          float* logits, ThreadPool* pool) {
  if (router.type != GgmlType::kF32) {
    return Project(router, x, n_tok, logits, pool);
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t e = 0; e < router.rows; ++e) {
      const auto* row =
          reinterpret_cast<const float*>(router.data + e * router.row_bytes);
      logits[t * router.rows + e] =
          kernels::DotF32GgmlOrder(row, x + t * router.cols, router.cols);
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// p = softmax(logits), max-subtracted, the sum in double.
void Softmax(const float* logits, int64_t n, std::vector<float>& p) {
  p.resize(n);
  const float max_l = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int64_t e = 0; e < n; ++e) {
    p[e] = std::exp(logits[e] - max_l);
    sum += p[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& v : p) v *= inv;
}

}  // namespace

void RouteToken(const float* logits, int64_t n_expert, int64_t k,
                Routing* routing) {
  std::vector<float> p;
  Softmax(logits, n_expert, p);

  std::vector<int32_t> order(n_expert);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) {
                      return p[a] > p[b] || (p[a] == p[b] && a < b);
                    });
  float total = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    routing->expert[i] = order[i];
    routing->weight[i] = p[order[i]];
    total += p[order[i]];
  }
  total = std::max(total, kMinWeightSum);
  for (int64_t i = 0; i < k; ++i) routing->weight[i] /= total;
}

void RouteTokenWith(const MoeConfig& c, const float* logits,
                    const float* bias, Routing* routing) {
  const int64_t n = c.n_expert, k = c.n_expert_used;
  if (c.plain_routing() && bias == nullptr) {
    RouteToken(logits, n, k, routing);
    return;
  }
  // Scores (ggml_soft_max / ggml_sigmoid), then the biased copy used only
  // for choosing.
  std::vector<float> p(n), sel(n);
  if (c.gating == ExpertGating::kSoftmax) {
    Softmax(logits, n, p);
  } else {
    for (int64_t e = 0; e < n; ++e) p[e] = Sigmoid(logits[e]);
  }
  for (int64_t e = 0; e < n; ++e) sel[e] = bias != nullptr ? p[e] + bias[e] : p[e];
  const auto better = [&sel](int32_t a, int32_t b) {
    return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
  };
  // Group limit: keep the n_group_used groups whose two best biased scores
  // sum highest (fewer than two experts per group: the best one).
  if (c.n_group > 1) {
    const int64_t per = n / c.n_group;
    const int64_t top = std::min<int64_t>(2, per);
    std::vector<float> group_score(c.n_group);
    std::vector<int32_t> members(per);
    for (int64_t g = 0; g < c.n_group; ++g) {
      std::iota(members.begin(), members.end(), static_cast<int32_t>(g * per));
      std::partial_sort(members.begin(), members.begin() + top, members.end(), better);
      double sum = 0.0;
      for (int64_t i = 0; i < top; ++i) sum += sel[members[i]];
      group_score[g] = static_cast<float>(sum);
    }
    std::vector<int32_t> groups(c.n_group);
    std::iota(groups.begin(), groups.end(), 0);
    std::partial_sort(groups.begin(), groups.begin() + c.n_group_used, groups.end(),
                      [&](int32_t a, int32_t b) {
                        return group_score[a] > group_score[b] ||
                               (group_score[a] == group_score[b] && a < b);
                      });
    std::vector<bool> keep(c.n_group, false);
    for (int64_t i = 0; i < c.n_group_used; ++i) keep[groups[i]] = true;
    for (int64_t e = 0; e < n; ++e) {
      if (!keep[e / per]) sel[e] = -INFINITY;
    }
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  double total = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    routing->expert[i] = order[i];
    routing->weight[i] = p[order[i]];
    total += p[order[i]];
  }
  if (c.norm_weights) {
    const float sum = std::max(static_cast<float>(total), kMinWeightSum);
    for (int64_t i = 0; i < k; ++i) routing->weight[i] /= sum;
  }
  if (c.weights_scale != 1.0f) {
    for (int64_t i = 0; i < k; ++i) routing->weight[i] *= c.weights_scale;
  }
}

absl::Status ExpertsOneToken(absl::Span<const ExpertWeights> experts,
                             const float* x, float* y,
                             ThreadPool* pool) {
  if (experts.empty()) return absl::OkStatus();
  const int64_t e_dim = experts[0].down.rows;
  // Hidden rows of expert i start at offset[i] in g and u.
  std::vector<int64_t> offset(experts.size() + 1, 0);
  for (size_t i = 0; i < experts.size(); ++i) {
    offset[i + 1] = offset[i] + experts[i].gate.rows;
  }
  std::vector<float> g(offset.back()), u(offset.back());
  std::vector<RowJob> jobs;
  for (size_t i = 0; i < experts.size(); ++i) {
    jobs.push_back({&experts[i].gate, x, &g[offset[i]]});
    jobs.push_back({&experts[i].up, x, &u[offset[i]]});
  }
  RETURN_IF_ERROR(ProjectRows(jobs, pool));
  for (size_t i = 0; i < g.size(); ++i) g[i] = Silu(g[i]) * u[i];
  jobs.clear();
  for (size_t i = 0; i < experts.size(); ++i) {
    jobs.push_back({&experts[i].down, &g[offset[i]], y + i * e_dim});
  }
  return ProjectRows(jobs, pool);
}

absl::Status RouteMoe(const MoeConfig& c, const Matrix& router,
                      const float* x, int64_t n_tok,
                      std::vector<Routing>* routes,
                      ThreadPool* pool) {
  std::vector<float> logits(n_tok * c.n_expert);
  RETURN_IF_ERROR(RouterLogits(router, x, n_tok, logits.data(), pool));
  routes->resize(n_tok);
  for (int64_t t = 0; t < n_tok; ++t) {
    RouteTokenWith(c, logits.data() + t * c.n_expert, nullptr, &(*routes)[t]);
  }
  return absl::OkStatus();
}

absl::Status RouteMoe(const MoeConfig& c, const MoeWeights& w, const float* x,
                      int64_t n_tok, std::vector<Routing>* routes,
                      ThreadPool* pool) {
  std::vector<float> logits(n_tok * c.n_expert);
  RETURN_IF_ERROR(RouterLogits(w.router, x, n_tok, logits.data(), pool));
  routes->resize(n_tok);
  for (int64_t t = 0; t < n_tok; ++t) {
    RouteTokenWith(c, logits.data() + t * c.n_expert, w.selection_bias,
                   &(*routes)[t]);
  }
  return absl::OkStatus();
}

void ForceRouting(RoutingSource& source, int64_t layer, int64_t k,
                  absl::Span<const StreamRows> runs, absl::Span<Routing> routes) {
  std::vector<int32_t> ids(routes.size() * k);
  int64_t row = 0;
  for (const StreamRows& r : runs) {
    source.Next(layer, r.stream, r.rows, ids.data() + row * k);
    row += r.rows;
  }
  for (size_t t = 0; t < routes.size(); ++t) {
    std::copy_n(ids.data() + t * k, k, routes[t].expert);
  }
}

std::vector<int32_t> RoutedExperts(const MoeConfig& c,
                                   absl::Span<const Routing> routes) {
  std::vector<bool> seen(c.n_expert, false);
  for (const Routing& r : routes) {
    for (int64_t s = 0; s < c.n_expert_used; ++s) {
      if (r.expert[s] != kSkippedExpert) seen[r.expert[s]] = true;
    }
  }
  std::vector<int32_t> used;
  for (int64_t e = 0; e < c.n_expert; ++e) {
    if (seen[e]) used.push_back(static_cast<int32_t>(e));
  }
  return used;
}

std::vector<ExpertWeights> ResidentExperts(const MoeWeights& w) {
  std::vector<ExpertWeights> out(w.gate.n_expert);
  for (int64_t e = 0; e < w.gate.n_expert; ++e) {
    out[e] = {w.gate.expert(e), w.up.expert(e), w.down.expert(e)};
  }
  return out;
}

absl::Status ComputeMoe(const MoeConfig& c, const MoeWeights& w,
                        absl::Span<const Routing> routes,
                        absl::Span<const ExpertWeights> experts,
                        const float* x, float* out,
                        ThreadPool* pool) {
  const int64_t e_dim = c.n_embd;
  const int64_t k = c.n_expert_used;
  const int64_t n_tok = static_cast<int64_t>(routes.size());
  if (n_tok == 1) return MoeOneToken(c, w, routes[0], experts, x, out, pool);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> slots;
  std::vector<int32_t> active;
  GroupByExpert(c, routes, slots, active);

  // Per (token, slot) expert outputs, summed below in slot order.
  std::vector<float> slot_out(n_tok * k * e_dim);
  kernels::PreparedActivations x_act;
  RETURN_IF_ERROR(x_act.Prepare(w.gate.type, x, e_dim, n_tok));
  const auto run_expert = [&](int32_t e, ExpertScratch& scratch,
                              ThreadPool* inner) {
    return RunExpert(experts[e], e, slots[e], routes, x, x_act, e_dim, k,
                     scratch, slot_out.data(), inner);
  };
  // Many experts per thread (short batches, small models): one expert per
  // task, one parallel loop instead of three per expert. Few: each product
  // is split across the pool instead.
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (threads > 1 && static_cast<int>(active.size()) >= 2 * threads) {
    // Experts differ in token count: deal them out largest first, each to
    // the least loaded thread, then one range per thread. Each expert
    // writes only its own slot rows, so the assignment changes no value.
    std::vector<std::vector<int32_t>> share(threads);
    std::vector<int64_t> load(threads, 0);
    std::vector<int32_t> order = active;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return slots[a].size() > slots[b].size();
    });
    for (int32_t e : order) {
      const int th = static_cast<int>(
          std::min_element(load.begin(), load.end()) - load.begin());
      share[th].push_back(e);
      load[th] += static_cast<int64_t>(slots[e].size());
    }
    std::vector<absl::Status> status(threads);
    pool->ParallelFor(threads, [&](int64_t begin, int64_t end) {
      ExpertScratch scratch;
      for (int64_t th = begin; th < end; ++th) {
        for (int32_t e : share[th]) {
          absl::Status st = run_expert(e, scratch, nullptr);
          if (!st.ok()) {
            status[th] = st;
            break;
          }
        }
      }
    });
    for (const absl::Status& st : status) RETURN_IF_ERROR(st);
  } else {
    ExpertScratch scratch;
    for (int32_t e : active) RETURN_IF_ERROR(run_expert(e, scratch, pool));
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    float* o = out + t * e_dim;
    std::memcpy(o, slot_out.data() + t * k * e_dim, e_dim * sizeof(float));
    for (int64_t s = 1; s < k; ++s) {
      const float* src = slot_out.data() + (t * k + s) * e_dim;
      for (int64_t j = 0; j < e_dim; ++j) o[j] += src[j];
    }
  }
  if (c.shared_ff == 0) return absl::OkStatus();
  return AddSharedExpert(w, e_dim, x, n_tok, out, pool);
}

absl::Status RunMoe(const MoeConfig& c, const MoeWeights& w, const float* x,
                    int64_t n_tok, float* out, ThreadPool* pool) {
  std::vector<Routing> routes;
  RETURN_IF_ERROR(RouteMoe(c, w.router, x, n_tok, &routes, pool));
  const std::vector<ExpertWeights> experts = ResidentExperts(w);
  return ComputeMoe(c, w, routes, experts, x, out, pool);
}

absl::Status RunDenseFfn(const DenseFfnWeights& w, const float* x,
                         int64_t n_tok, float* out, ThreadPool* pool) {
  if (n_tok == 1) {
    const ExpertWeights one[] = {{w.gate, w.up, w.down}};
    return ExpertsOneToken(one, x, out, pool);
  }
  std::vector<float> g_buf, u_buf;
  return SwiGlu(w.gate, w.up, w.down, x, n_tok, out, g_buf, u_buf, pool);
}

}  // namespace sluice
