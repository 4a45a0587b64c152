// Speed of the CUDA weight products (kernels/cuda/quant_matmul.h) on the
// bench35 shapes (Qwen3.5-35B-A3B layers: hidden 2048, 256 experts of
// 2048->512 gate/up and 512->2048 down, 8 routed per token, a dense
// 2048->8192 projection, the LM head 2048->248320).
//
//   bazel run -c opt //bench:cuda_matmul_bench [--kimi|--batch]   (needs a GPU)
//
// Decode lines report weight bytes read per second: every launch touches a
// different copy of the weights (several hundred MB in all, more than L2),
// so the figure is HBM traffic, not cache hits. Batch lines (prefill shapes)
// report the time and multiply-add rate of the FP32 kernel and of the
// tensor-core kernel on the same launch, and the speed-up.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "format/ggml_type.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/quant_matmul.h"

namespace sluice::cuda {
namespace {

constexpr int64_t kHidden = 2048;
constexpr int64_t kExpertFf = 512;
constexpr int kExperts = 256;
constexpr int kRouted = 8;
constexpr int64_t kDenseFf = 8192;
constexpr int64_t kVocab = 248320;
constexpr int64_t kPrefill = 512;
constexpr uint64_t kColdBytes = 512ull << 20;  // well past the 50 MB of L2

#define CHECK_OK(expr)                                                      \
  do {                                                                      \
    absl::Status s_ = (expr);                                               \
    if (!s_.ok()) {                                                         \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.ToString().c_str()); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (false)

template <typename T>
T Unwrap(absl::StatusOr<T> v) {
  CHECK_OK(v.status());
  return std::move(*v);
}

std::string Name(GgmlType t) { return kernels::TypeName(t); }

// `copies` matrices of rows x cols (the same random bytes at distinct
// addresses) and a device table of their pointers.
struct Matrices {
  DeviceBuffer data, table;
  int copies = 0;
  uint64_t bytes = 0;  // of one matrix
};

Matrices MakeMatrices(GgmlType t, int64_t rows, int64_t cols, int copies) {
  std::mt19937 rng(42);
  const std::vector<uint8_t> m = kernels::testing_util::RandomWeights(t, rows, cols, rng);
  Matrices out;
  out.copies = copies;
  out.bytes = m.size();
  const uint64_t slot = (m.size() + 255) / 256 * 256;
  out.data = Unwrap(DeviceBuffer::Create(slot * copies));
  std::vector<const void*> ptrs(copies);
  for (int i = 0; i < copies; ++i) {
    uint8_t* p = out.data.as<uint8_t>() + slot * i;
    CHECK_OK(CopyToDevice(p, m.data(), m.size(), nullptr));
    ptrs[i] = p;
  }
  out.table = Unwrap(DeviceBuffer::Create(copies * sizeof(void*)));
  CHECK_OK(CopyToDevice(out.table.data(), ptrs.data(), copies * sizeof(void*), nullptr));
  return out;
}

DeviceBuffer Activations(int64_t n) {
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  for (float& v : x) v = val(rng);
  DeviceBuffer d = Unwrap(DeviceBuffer::Create(n * sizeof(float)));
  CHECK_OK(CopyToDevice(d.data(), x.data(), n * sizeof(float), nullptr));
  return d;
}

DeviceBuffer Ints(const std::vector<int32_t>& v) {
  DeviceBuffer d = Unwrap(DeviceBuffer::Create(std::max<size_t>(v.size(), 1) * 4));
  CHECK_OK(CopyToDevice(d.data(), v.data(), v.size() * 4, nullptr));
  return d;
}

// Mean milliseconds per call of launch(i) over `iters` calls after a warm-up.
template <typename F>
double TimeMs(int iters, F launch) {
  for (int i = 0; i < 5; ++i) CHECK_OK(launch(i));
  Event start = Unwrap(CreateEvent(true)), stop = Unwrap(CreateEvent(true));
  CHECK_OK(RecordEvent(start, nullptr));
  for (int i = 0; i < iters; ++i) CHECK_OK(launch(i));
  CHECK_OK(RecordEvent(stop, nullptr));
  CHECK_OK(Synchronize(nullptr));
  const double ms = Unwrap(ElapsedMs(start, stop)) / iters;
  DestroyEvent(start);
  DestroyEvent(stop);
  return ms;
}

void Report(const char* phase, GgmlType t, const std::string& shape, double ms, double bytes,
            double macs) {
  std::printf("%-8s %-5s %-36s %9.2f us %8.1f GB/s %8.2f TMAC/s\n", phase, Name(t).c_str(),
              shape.c_str(), ms * 1e3, bytes / (ms * 1e-3) / 1e9, macs / (ms * 1e-3) / 1e12);
}

// n_tok tokens (decode of a small batch: one tile, weights read once)
// through a dense rows x cols matrix, rotating over cold copies.
void DenseDecode(GgmlType t, int64_t rows, int64_t cols, const std::string& shape,
                 int64_t n_tok = 1) {
  const uint64_t one = RowBytes(t, cols) * rows;
  const int copies = static_cast<int>(std::max<uint64_t>(1, kColdBytes / one));
  Matrices m = MakeMatrices(t, rows, cols, copies);
  DeviceBuffer x = Activations(n_tok * cols), y = Unwrap(DeviceBuffer::Create(n_tok * rows * 4));
  const uint64_t slot = (m.bytes + 255) / 256 * 256;
  const double ms = TimeMs(200, [&](int i) {
    return MatMul(t, m.data.as<uint8_t>() + slot * (i % copies), rows, cols, x.as<float>(), n_tok,
                  y.as<float>(), nullptr);
  });
  Report("decode", t, shape, ms, static_cast<double>(one),
         static_cast<double>(rows * cols * n_tok));
}

// A one-token product's phase: "stream8" where one-row launches stream
// through shared memory (StreamGroupedEnabled), else "decode8".
const char* Q8Phase() { return StreamGroupedEnabled() ? "stream8" : "decode8"; }

// One token routed to `routed` of `experts` experts: one grouped launch, a
// different expert set each call. q8: the activation row rounded to 8 bits
// once, before, and read in place (as the one-token pass multiplies);
// otherwise F32 activations.
void MoeDecode(GgmlType t, int64_t rows, int64_t cols, const std::string& shape,
               int experts = kExperts, int routed = kRouted, bool q8 = false) {
  Matrices m = MakeMatrices(t, rows, cols, experts);
  constexpr int kSets = 64;
  std::vector<int32_t> sets;
  std::mt19937 rng(5);
  std::vector<int32_t> ids(experts);
  for (int s = 0; s < kSets; ++s) {
    for (int e = 0; e < experts; ++e) ids[e] = e;
    std::shuffle(ids.begin(), ids.end(), rng);
    sets.insert(sets.end(), ids.begin(), ids.begin() + routed);
  }
  DeviceBuffer d_sets = Ints(sets), d_xrow = Ints(std::vector<int32_t>(routed, 0));
  DeviceBuffer x = Activations(cols), y = Unwrap(DeviceBuffer::Create(routed * rows * 4));
  DeviceBuffer xq = Unwrap(DeviceBuffer::Create(Q8ActivationRowBytes(t, cols) + 256));
  GroupedMatMul a;
  a.type = t;
  a.rows = rows;
  a.cols = cols;
  a.n_groups = routed;
  a.max_entries_per_group = 1;
  a.d_weights = m.table.as<const void* const>();
  a.d_x_row = d_xrow.as<const int32_t>();
  a.d_x = x.as<float>();
  a.x_stride = cols;
  a.d_y = y.as<float>();
  a.y_stride = rows;
  a.tensor_cores = false;
  if (q8) {
    CHECK_OK(RoundActivationsQ8(t, x.as<float>(), 1, cols, cols, xq.as<uint8_t>(), nullptr));
    a.q8_activations = true;
    a.d_x_q8 = xq.as<uint8_t>();
  }
  const double ms = TimeMs(200, [&](int i) {
    a.d_group_weight = d_sets.as<const int32_t>() + (i % kSets) * routed;
    return LaunchGroupedMatMul(a, nullptr);
  });
  Report(q8 ? Q8Phase() : "decode", t, shape, ms, static_cast<double>(m.bytes) * routed,
         static_cast<double>(rows * cols) * routed);
}

// One token through a dense rows x cols matrix with its activation row
// rounded to 8 bits once, before (the one-token pass's projections).
void DenseDecodeQ8(GgmlType t, int64_t rows, int64_t cols, const std::string& shape) {
  const uint64_t one = RowBytes(t, cols) * rows;
  const int copies = static_cast<int>(std::max<uint64_t>(2, kColdBytes / one));
  Matrices m = MakeMatrices(t, rows, cols, copies);
  DeviceBuffer x = Activations(cols), y = Unwrap(DeviceBuffer::Create(rows * 4));
  DeviceBuffer xq = Unwrap(DeviceBuffer::Create(Q8ActivationRowBytes(t, cols) + 256));
  CHECK_OK(RoundActivationsQ8(t, x.as<float>(), 1, cols, cols, xq.as<uint8_t>(), nullptr));
  const uint64_t slot = (m.bytes + 255) / 256 * 256;
  const double ms = TimeMs(200, [&](int i) {
    return MatMul(t, m.data.as<uint8_t>() + slot * (i % copies), rows, cols, x.as<float>(), 1,
                  y.as<float>(), nullptr, /*tensor_cores=*/false, /*q8_activations=*/true,
                  xq.as<uint8_t>());
  });
  Report(Q8Phase(), t, shape, ms, static_cast<double>(one), static_cast<double>(rows * cols));
}

// The Kimi-K2 shape's one-token products (hidden 7168, 384 experts of
// 7168->2048, 8 routed; MLA: q_a 7168->1536, q_b 1536->12288, kv_a
// 7168->576, output 8192->7168), 8-bit activations as the pass runs them,
// with the one-row launches streamed (StreamGroupedQ8) and not.
void KimiDecode() {
  DenseDecode(GgmlType::kF32, 384, 7168, "kimi router 7168->384");
  const bool was = StreamGroupedEnabled();
  for (const bool streamed : {false, true}) {
    SetStreamGroupedEnabled(streamed);
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      MoeDecode(t, 2048, 7168, "kimi 16 x 7168->2048 (gate+up)", 384, 16, true);
      MoeDecode(t, 7168, 2048, "kimi 8 x 2048->7168 (down)", 384, 8, true);
      DenseDecodeQ8(t, 1536, 7168, "kimi q_a 7168->1536");
      DenseDecodeQ8(t, 12288, 1536, "kimi q_b 1536->12288");
      DenseDecodeQ8(t, 576, 7168, "kimi kv_a 7168->576");
      DenseDecodeQ8(t, 7168, 8192, "kimi out 8192->7168");
      DenseDecodeQ8(t, 2048, 7168, "kimi shared 7168->2048");
    }
  }
  SetStreamGroupedEnabled(was);
}

// A decode batch of n_tok rows (one token each of n_tok sequences) rounded
// to 8 bits once, as the CUDA batch pass multiplies them: through a dense
// rows x cols matrix (experts == 0; cold copies in turn), or through the
// routed experts, each row to `routed` of `experts` at random, one grouped
// launch over the distinct experts (a different draw each call). Prints
// the grouped kernel's time and the streamed one's (SLUICE_CUDA_STREAM_ENTRIES)
// and the bytes of the distinct matrices read per second.
void FewRows(GgmlType t, int64_t rows, int64_t cols, int n_tok, const std::string& shape,
             int experts = 0, int routed = 0) {
  const uint64_t one = RowBytes(t, cols) * rows;
  const int copies = experts > 0 ? experts
                                 : static_cast<int>(std::max<uint64_t>(2, kColdBytes / one));
  Matrices m = MakeMatrices(t, rows, cols, copies);
  const int64_t entries = experts > 0 ? static_cast<int64_t>(n_tok) * routed : n_tok;
  DeviceBuffer x = Activations(n_tok * cols), y = Unwrap(DeviceBuffer::Create(entries * rows * 4));
  DeviceBuffer xq =
      Unwrap(DeviceBuffer::Create(n_tok * Q8ActivationRowBytes(t, cols) + 256));
  CHECK_OK(RoundActivationsQ8(t, x.as<float>(), n_tok, cols, cols, xq.as<uint8_t>(), nullptr));
  // Routing draws: per draw the distinct experts (group_weight), their
  // entry bounds and each entry's row, as GroupByExpert lays them out.
  constexpr int kDraws = 32;
  std::vector<int32_t> gw, begin, xrow;
  std::vector<int> n_groups, most;
  double distinct = 0;
  std::mt19937 rng(9);
  for (int d = 0; d < kDraws && experts > 0; ++d) {
    std::vector<std::vector<int32_t>> rows_of(experts);
    std::vector<int32_t> ids(experts);
    for (int tok = 0; tok < n_tok; ++tok) {
      for (int e = 0; e < experts; ++e) ids[e] = e;
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int k = 0; k < routed; ++k) rows_of[ids[k]].push_back(tok);
    }
    int groups = 0, largest = 0, at = 0;
    for (int e = 0; e < experts; ++e) {
      if (rows_of[e].empty()) continue;
      gw.push_back(e);
      begin.push_back(at);
      for (int32_t r : rows_of[e]) xrow.push_back(r);
      at += static_cast<int>(rows_of[e].size());
      largest = std::max(largest, static_cast<int>(rows_of[e].size()));
      ++groups;
    }
    begin.push_back(at);
    // Pad to the draw's fixed stride in the tables.
    for (int g = groups; g < experts; ++g) gw.push_back(0);
    for (int g = groups + 1; g <= experts; ++g) begin.push_back(at);
    n_groups.push_back(groups);
    most.push_back(largest);
    distinct += groups;
  }
  const DeviceBuffer d_gw = Ints(gw), d_begin = Ints(begin), d_xrow = Ints(xrow);
  const uint64_t slot = (m.bytes + 255) / 256 * 256;
  auto launch = [&](int i) {
    if (experts == 0) {
      return MatMul(t, m.data.as<uint8_t>() + slot * (i % copies), rows, cols, x.as<float>(),
                    n_tok, y.as<float>(), nullptr, /*tensor_cores=*/false,
                    /*q8_activations=*/true, xq.as<uint8_t>());
    }
    const int d = i % kDraws;
    GroupedMatMul a;
    a.type = t;
    a.rows = rows;
    a.cols = cols;
    a.n_groups = n_groups[d];
    a.max_entries_per_group = most[d];
    a.d_weights = m.table.as<const void* const>();
    a.d_group_weight = d_gw.as<const int32_t>() + d * experts;
    a.d_group_begin = d_begin.as<const int32_t>() + d * (experts + 1);
    a.d_x_row = d_xrow.as<const int32_t>() + d * entries;
    a.d_x = x.as<float>();
    a.x_stride = cols;
    a.d_y = y.as<float>();
    a.y_stride = rows;
    a.tensor_cores = false;
    a.q8_activations = true;
    a.d_x_q8 = xq.as<uint8_t>();
    return LaunchGroupedMatMul(a, nullptr);
  };
  const double matrices = experts > 0 ? distinct / kDraws : 1.0;
  const bool was = StreamEntriesEnabled();
  double ms[2];
  for (const bool on : {false, true}) {
    SetStreamEntriesEnabled(on);
    const uint64_t before = StreamedEntryLaunches();
    ms[on] = TimeMs(200, launch);
    if (on && StreamedEntryLaunches() == before) ms[on] = 0;  // not streamed
  }
  SetStreamEntriesEnabled(was);
  const double bytes = matrices * static_cast<double>(one);
  std::printf("%-8s %-5s %-44s grouped %8.2f us %7.1f GB/s | streamed ", "rows8", Name(t).c_str(),
              shape.c_str(), ms[0] * 1e3, bytes / (ms[0] * 1e-3) / 1e9);
  if (ms[1] > 0) {
    std::printf("%8.2f us %7.1f GB/s | x%.2f\n", ms[1] * 1e3, bytes / (ms[1] * 1e-3) / 1e9,
                ms[0] / ms[1]);
  } else {
    std::printf("(not taken)\n");
  }
}

// bench35's decode-batch products at 1-32 rows: the DeltaNet input
// projection's shape (2048 -> 8192), the shared expert's (2048 -> 512, and
// back), the routed experts' gate/up and down; then bench397's (hidden
// 4096, Q4_K dense matrices, 10 of 512 Q1_0 experts of 1024).
void BatchDecode() {
  for (const int n : {1, 2, 4, 8, 16, 32}) {
    const std::string rows = absl::StrCat(" x ", n, " rows");
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ1_0}) {
      FewRows(t, kDenseFf, kHidden, n, "dense 2048->8192" + rows);
      FewRows(t, kExpertFf, kHidden, n, "dense 2048->512" + rows);
      FewRows(t, kExpertFf, kHidden, n, "experts 8/256 2048->512" + rows, kExperts, kRouted);
      FewRows(t, kHidden, kExpertFf, n, "experts 8/256 512->2048" + rows, kExperts, kRouted);
    }
  }
  for (const int n : {4, 8, 16, 32}) {
    const std::string rows = absl::StrCat(" x ", n, " rows");
    FewRows(GgmlType::kQ4_K, 16384, 4096, n, "bench397 dense 4096->16384" + rows);
    FewRows(GgmlType::kQ4_K, 1024, 4096, n, "bench397 dense 4096->1024" + rows);
    FewRows(GgmlType::kQ1_0, 1024, 4096, n, "bench397 experts 10/512 4096->1024" + rows, 512, 10);
    FewRows(GgmlType::kQ1_0, 4096, 1024, n, "bench397 experts 10/512 1024->4096" + rows, 512, 10);
  }
}

// A batch's products on both kernels: `groups` distinct matrices of rows x
// cols (experts), each multiplied by `per_group` activation rows in one
// grouped launch; `dense` instead runs MatMul of per_group tokens through one
// matrix. Prints the time and MAC rate of the FP32 kernel and of the
// tensor-core kernel (SetTensorCoresEnabled picks) and the ratio.
struct BatchShape {
  const char* name;
  int64_t rows, cols;
  int groups;
  int per_group;
  bool dense;
};

double TimeBatch(GgmlType t, const BatchShape& s, const Matrices& m, const DeviceBuffer& x,
                 const DeviceBuffer& begin, const DeviceBuffer& y, bool tensor_cores) {
  SetTensorCoresEnabled(tensor_cores);
  if (s.dense) {
    return TimeMs(20, [&](int) {
      return MatMul(t, m.data.data(), s.rows, s.cols, x.as<float>(), s.per_group, y.as<float>(),
                    nullptr);
    });
  }
  GroupedMatMul a;
  a.type = t;
  a.rows = s.rows;
  a.cols = s.cols;
  a.n_groups = s.groups;
  a.max_entries_per_group = s.per_group;
  a.d_weights = m.table.as<const void* const>();
  a.d_group_begin = begin.as<const int32_t>();
  a.d_x = x.as<float>();
  a.x_stride = s.cols;
  a.d_y = y.as<float>();
  a.y_stride = s.rows;
  return TimeMs(20, [&](int) { return LaunchGroupedMatMul(a, nullptr); });
}

void Batch(GgmlType t, const BatchShape& s) {
  const Matrices m = MakeMatrices(t, s.rows, s.cols, s.dense ? 1 : s.groups);
  const int64_t entries = static_cast<int64_t>(s.dense ? 1 : s.groups) * s.per_group;
  std::vector<int32_t> offsets;
  for (int g = 0; g <= s.groups; ++g) offsets.push_back(g * s.per_group);
  const DeviceBuffer begin = Ints(offsets), x = Activations(entries * s.cols);
  const DeviceBuffer y = Unwrap(DeviceBuffer::Create(entries * s.rows * 4));
  const double macs = static_cast<double>(entries) * s.rows * s.cols;
  const double fp32 = TimeBatch(t, s, m, x, begin, y, false);
  const double tc = TimeBatch(t, s, m, x, begin, y, true);
  SetTensorCoresEnabled(true);
  std::printf("%-8s %-5s %-36s fp32 %9.2f us %6.2f TMAC/s | tensor cores %9.2f us %6.2f TMAC/s | x%.1f\n",
              "batch", Name(t).c_str(), s.name, fp32 * 1e3, macs / (fp32 * 1e-3) / 1e12, tc * 1e3,
              macs / (tc * 1e-3) / 1e12, fp32 / tc);
}

// The bandwidth ceiling the decode lines compare with: a device-to-device
// copy reads and writes each byte, so GB/s here counts both.
void CopyBaseline() {
  const uint64_t bytes = kColdBytes / 2;
  DeviceBuffer a = Unwrap(DeviceBuffer::Create(bytes)), b = Unwrap(DeviceBuffer::Create(bytes));
  CHECK_OK(Memset(a.data(), 1, bytes, nullptr));
  const double ms = TimeMs(20, [&](int) { return CopyOnDevice(b.data(), a.data(), bytes, nullptr); });
  std::printf("%-8s %-5s %-36s %9.2f us %8.1f GB/s (read + write)\n", "copy", "-",
              "device to device, 256 MiB", ms * 1e3, 2.0 * bytes / (ms * 1e-3) / 1e9);
}

int Main(const std::string& mode) {
  const bool only_kimi = mode == "--kimi";
  if (absl::Status s = SetDevice(0); !s.ok()) {
    std::fprintf(stderr, "no CUDA device: %s\n", s.ToString().c_str());
    return 1;
  }
  PrepareDecodeKernels();  // the streamed kernels' grid and shared memory
  std::printf("%-8s %-5s %-36s %12s %13s %15s\n", "phase", "type", "shape", "time", "weights",
              "F32 MACs");
  CopyBaseline();
  if (mode == "--batch") {
    SetStreamDenseEntriesAll(true);  // the kernel on every shape, whatever the rule picks
    BatchDecode();
    return 0;
  }
  KimiDecode();
  if (only_kimi) return 0;
  const GgmlType all[] = {GgmlType::kQ4_K, GgmlType::kQ1_0, GgmlType::kQ5_K, GgmlType::kQ6_K,
                          GgmlType::kQ8_0, GgmlType::kBF16, GgmlType::kF16,  GgmlType::kF32};
  for (GgmlType t : all) DenseDecode(t, kDenseFf, kHidden, "dense 2048->8192, 1 token");
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ1_0, GgmlType::kQ5_K, GgmlType::kQ8_0}) {
    MoeDecode(t, kExpertFf, kHidden, "8 experts 2048->512 (gate/up)");
    MoeDecode(t, kHidden, kExpertFf, "8 experts 512->2048 (down)");
  }
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ1_0, GgmlType::kQ8_0}) {
    DenseDecode(t, kDenseFf, kHidden, "dense 2048->8192, 4 tokens", 4);
    DenseDecode(t, kDenseFf, kHidden, "dense 2048->8192, 8 tokens", 8);
  }
  DenseDecode(GgmlType::kQ6_K, kVocab, kHidden, "LM head 2048->248320");
  DenseDecode(GgmlType::kQ8_0, kVocab, kHidden, "LM head 2048->248320");
  // Prefill shapes: one expert's group of 512 tokens, the 512-token prompt
  // of bench35 routed evenly (16 tokens per expert, 256 experts), a dense
  // projection of 512 tokens, and a larger model's expert (hidden 4096, FFN
  // 1024, 64 tokens).
  const BatchShape batches[] = {
      {"expert 2048->512, 1 group of 512", kExpertFf, kHidden, 1, 512, false},
      {"expert 512->2048, 1 group of 512", kHidden, kExpertFf, 1, 512, false},
      {"experts 2048->512, 256 x 16 tokens", kExpertFf, kHidden, kExperts, 16, false},
      {"experts 512->2048, 256 x 16 tokens", kHidden, kExpertFf, kExperts, 16, false},
      {"dense 2048->8192, 512 tokens", kDenseFf, kHidden, 1, static_cast<int>(kPrefill), true},
      {"experts 4096->1024, 32 x 64 tokens", 1024, 4096, 32, 64, false},
      {"experts 1024->4096, 32 x 64 tokens", 4096, 1024, 32, 64, false},
  };
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_0,
                     GgmlType::kBF16, GgmlType::kF16, GgmlType::kQ1_0}) {
    for (const BatchShape& b : batches) Batch(t, b);
  }
  return 0;
}

}  // namespace
}  // namespace sluice::cuda

// --kimi: the copy baseline and the Kimi-K2 shapes only; --batch: the
// copy baseline and the decode-batch products (FewRows).
int main(int argc, char** argv) { return sluice::cuda::Main(argc > 1 ? argv[1] : ""); }
