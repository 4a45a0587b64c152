// The decode kernels that stream weights through shared memory give the
// bits of the ones that do not (SLUICE_CUDA_STREAM_PROJECT=0): DecodeProject
// on the shapes of bench35's launches (the DeltaNet input projection of two
// types, the output projection with three stages, the router with its top-k
// beside the shared expert's pair; row counts that end inside a row block)
// and the routed experts' gate/up; and every launch that reads an input
// quantized once (DecodePrepare, DecodeExpertsPrepareDown) gives the bits
// of the one that quantizes it in every block, the down products included.
// Every output is compared as bits: y, the top-k ids and weights, x + add,
// the normed vector, the SwiGLU rows; and AttendDecode against Attend. Skips where no CUDA device is present.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/skip.h"
#include "format/ggml_type.h"
#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cuda/decode_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/sm90_test_upload.h"

namespace sluice::cuda {
namespace {

struct MatrixCase {
  GgmlType type;
  int64_t rows;
  bool pair = false;
};

struct ProjectCase {
  std::string name;
  int64_t n = 0;
  std::vector<MatrixCase> m;
  bool norm = false;
  int topk = 0;  // k of matrix 0's routing (0: none)
  bool streams = true;  // whether DecodeProjectStreamed holds with streaming on
};

// Every output buffer a launch writes, read back.
struct Outputs {
  std::vector<std::vector<float>> y;
  std::vector<int32_t> ids, paired;
  std::vector<float> weights, x_out, xn_out;
};

template <typename T = float>
std::vector<T> Read(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(CopyToHost(v.data(), b.data(), n * sizeof(T), nullptr).ok());
  return v;
}

class DecodeProjectSm90Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = SetDevice(0); !s.ok()) SLUICE_SKIP("no CUDA device here: " + s.ToString());
    PrepareDecodeKernels();
  }
  void TearDown() override { unsetenv("SLUICE_CUDA_STREAM_PROJECT"); }

  void Run(const ProjectCase& c) {
    std::mt19937 rng(77);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    std::vector<float> x(c.n), add(c.n), norm(c.n);
    for (float& v : x) v = val(rng);
    for (float& v : add) v = 0.5f * val(rng);
    for (float& v : norm) v = 1.0f + 0.25f * val(rng);
    DeviceBuffer d_x = Upload(x), d_add = Upload(add), d_norm = Upload(norm);
    std::vector<DeviceBuffer> weights, ups, ys;
    for (const MatrixCase& m : c.m) {
      weights.push_back(Upload(kernels::testing_util::RandomWeights(m.type, m.rows, c.n, rng)));
      ups.push_back(Upload(m.pair ? kernels::testing_util::RandomWeights(m.type, m.rows, c.n, rng)
                                  : std::vector<uint8_t>()));
      ys.push_back(Upload(std::vector<float>(m.rows, 0.0f)));
    }
    const int k = c.topk;
    DeviceBuffer d_ids = Upload(std::vector<int32_t>(k + 1, -1));
    DeviceBuffer d_paired = Upload(std::vector<int32_t>(2 * k + 1, -1));
    DeviceBuffer d_w = Upload(std::vector<float>(k + 1, 0.0f));
    DeviceBuffer d_counter = Upload(std::vector<int32_t>(1, 0));
    DeviceBuffer d_xo = Upload(std::vector<float>(c.n, 0.0f));
    DeviceBuffer d_xno = Upload(std::vector<float>(c.n, 0.0f));

    DecodeProjection p;
    p.in.x = d_x.as<const float>();
    p.in.n = c.n;
    if (c.norm) {
      p.in.add = d_add.as<const float>();
      p.in.x_out = d_xo.as<float>();
      p.in.norm_w = d_norm.as<const float>();
      p.in.eps = 1e-6f;
      p.in.xn_out = d_xno.as<float>();
    }
    p.n_matrices = static_cast<int>(c.m.size());
    for (size_t i = 0; i < c.m.size(); ++i) {
      p.m[i].type = static_cast<int>(c.m[i].type);
      p.m[i].w = weights[i].data();
      p.m[i].up = c.m[i].pair ? ups[i].data() : nullptr;
      p.m[i].rows = c.m[i].rows;
      p.m[i].y = ys[i].as<float>();
    }
    if (k > 0) {
      p.topk.k = k;
      p.topk.ids = d_ids.as<int32_t>();
      p.topk.weights = d_w.as<float>();
      p.topk.paired_ids = d_paired.as<int32_t>();
      p.topk.counter = d_counter.as<int32_t>();
    }
    // A launch of q, streamed or not; with `prepare`, its input quantized
    // first by DecodePrepare (which then writes x_out and xn_out) and read
    // so.
    auto launch = [&](bool streamed, bool prepare = false) {
      setenv("SLUICE_CUDA_STREAM_PROJECT", streamed ? "1" : "0", 1);
      DecodeProjection q = p;
      DeviceBuffer d_q8;
      if (prepare) {
        EXPECT_TRUE(Memset(d_xo.data(), 0, c.n * 4, nullptr).ok());
        EXPECT_TRUE(Memset(d_xno.data(), 0, c.n * 4, nullptr).ok());
        int types[kMaxDecodeMatrices];
        for (int i = 0; i < p.n_matrices; ++i) types[i] = p.m[i].type;
        const int formats = DecodeQ8Formats(types, p.n_matrices, c.n);
        EXPECT_NE(formats, 0) << c.name;
        d_q8 = Upload(std::vector<uint8_t>(DecodeQ8Bytes(formats, c.n), 0));
        DecodePrepare(p.in, d_q8.as<uint8_t>(), formats, nullptr);
        q.in = DecodeInput();
        q.in.x = c.norm ? d_xno.as<const float>() : p.in.x;
        q.in.n = c.n;
        q.in.prepared = {d_q8.as<const uint8_t>(), formats};
      }
      EXPECT_EQ(DecodeProjectStreamed(q), streamed && c.streams) << c.name;
      // All-ones bytes: a NaN wherever a row is left unwritten.
      for (size_t i = 0; i < c.m.size(); ++i) {
        EXPECT_TRUE(Memset(ys[i].data(), 0xFF, c.m[i].rows * 4, nullptr).ok());
      }
      DecodeProject(q, nullptr);
      EXPECT_TRUE(LastLaunchError("DecodeProject").ok()) << c.name;
      EXPECT_TRUE(Synchronize(nullptr).ok()) << c.name;
      Outputs o;
      for (size_t i = 0; i < c.m.size(); ++i) o.y.push_back(Read(ys[i], c.m[i].rows));
      o.ids = Read<int32_t>(d_ids, k + 1);
      o.paired = Read<int32_t>(d_paired, 2 * k + 1);
      o.weights = Read(d_w, k + 1);
      o.x_out = Read(d_xo, c.n);
      o.xn_out = Read(d_xno, c.n);
      EXPECT_EQ(Read<int32_t>(d_counter, 1)[0], 0) << c.name << ": the routing counter must be left zero";
      return o;
    };
    const Outputs blocks = launch(false);
    if (k > 0) ExpectWarpRouting(blocks.y[0], k, blocks, c.name);
    Compare(c, blocks, launch(true), "streamed");
    Compare(c, blocks, launch(false, true), "prepared");
    Compare(c, blocks, launch(true, true), "prepared, streamed");
    // Unstreamed launches of few row blocks take one row a lane group by
    // default; two (SLUICE_CUDA_PROJECT_ONE_ROW=0) give the same bits.
    setenv("SLUICE_CUDA_PROJECT_ONE_ROW", "0", 1);
    Compare(c, blocks, launch(false), "two rows a lane group");
    unsetenv("SLUICE_CUDA_PROJECT_ONE_ROW");
  }

  // The launch's routing (its epilogue, after the blocks' count) has the
  // bits of ops.h TopK's on the same logits.
  static void ExpectWarpRouting(const std::vector<float>& logits, int k, const Outputs& o,
                                const std::string& name) {
    const int n_expert = static_cast<int>(logits.size());
    DeviceBuffer d_l = Upload(logits);
    DeviceBuffer d_ids = Upload(std::vector<int32_t>(k, -1));
    DeviceBuffer d_paired = Upload(std::vector<int32_t>(2 * k, -1));
    DeviceBuffer d_w = Upload(std::vector<float>(k, 0.0f));
    TopK(d_l.as<const float>(), 1, n_expert, k, d_ids.as<int32_t>(), d_w.as<float>(), nullptr,
         d_paired.as<int32_t>());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    const std::vector<int32_t> ids = Read<int32_t>(d_ids, k), paired = Read<int32_t>(d_paired, 2 * k);
    const std::vector<float> w = Read(d_w, k);
    EXPECT_EQ(std::vector<int32_t>(o.ids.begin(), o.ids.begin() + k), ids) << name;
    EXPECT_EQ(std::vector<int32_t>(o.paired.begin(), o.paired.begin() + 2 * k), paired) << name;
    EXPECT_EQ(std::memcmp(o.weights.data(), w.data(), k * 4), 0) << name;
  }

  // Every output of `streamed` has the bits of `blocks`.
  void Compare(const ProjectCase& c, const Outputs& blocks, const Outputs& streamed,
               const std::string& how) {
    SCOPED_TRACE(how);
    const int k = c.topk;
    for (size_t i = 0; i < c.m.size(); ++i) {
      ASSERT_EQ(std::memcmp(blocks.y[i].data(), streamed.y[i].data(), c.m[i].rows * 4), 0)
          << c.name << ": matrix " << i;
      double sum = 0;
      for (float v : streamed.y[i]) sum += v * v;
      EXPECT_GT(sum, 0.0) << c.name << ": matrix " << i << " is all zero";
    }
    EXPECT_EQ(blocks.ids, streamed.ids) << c.name;
    EXPECT_EQ(blocks.paired, streamed.paired) << c.name;
    EXPECT_EQ(std::memcmp(blocks.weights.data(), streamed.weights.data(), (k + 1) * 4), 0)
        << c.name;
    EXPECT_EQ(std::memcmp(blocks.x_out.data(), streamed.x_out.data(), c.n * 4), 0) << c.name;
    EXPECT_EQ(std::memcmp(blocks.xn_out.data(), streamed.xn_out.data(), c.n * 4), 0) << c.name;
    if (k > 0) {
      EXPECT_GE(streamed.ids[0], 0) << c.name << ": no expert was chosen";
      EXPECT_EQ(streamed.ids[k], -1) << c.name << ": more than k ids written";
    }
  }
};

TEST_F(DecodeProjectSm90Test, DeltaNetInputTwoTypesWithNorm) {
  Run({"delta.in", 2048, {{GgmlType::kQ5_K, 8192 + 3}, {GgmlType::kQ4_K, 517}}, true, 0});
}

TEST_F(DecodeProjectSm90Test, OutputProjectionThreeStages) {
  // Q6_K rows of 4096 (3,360 bytes): eight rows do not fit four stages.
  Run({"out.q6_k", 4096, {{GgmlType::kQ6_K, 2048 + 5}}, false, 0});
  Run({"out.q4_k", 4096, {{GgmlType::kQ4_K, 2048}}, false, 0});
}

TEST_F(DecodeProjectSm90Test, RouterWithTopKBesideTheSharedPair) {
  Run({"route.q8_0",
       2048,
       {{GgmlType::kQ8_0, 256}, {GgmlType::kQ4_K, 512 + 7, true}, {GgmlType::kQ8_0, 1}},
       true,
       8});
}

TEST_F(DecodeProjectSm90Test, F32RouterWithTopKBesideTheSharedPair) {
  // bench35's router and shared gate are F32: their blocks read the float
  // vector, the pair's the 8-bit one; nothing streams.
  Run({"route.f32",
       2048,
       {{GgmlType::kF32, 256}, {GgmlType::kQ4_K, 512, true}, {GgmlType::kF32, 1}},
       true,
       8,
       false});
}

// Ties: an F32 router whose rows come in runs of identical copies gives
// equal logits, which the router's epilogue must take lowest id first, as
// ops.h TopK does (k = 8, and 10 as the target model routes).
TEST_F(DecodeProjectSm90Test, RouterTiesGoToTheLowerId) {
  std::mt19937 rng(5);
  const int64_t n = 1024;
  for (const int k : {8, 10}) {
    for (const int copies : {2, 5}) {
      const int rows = 256;
      std::vector<uint8_t> w(rows * n * 4);
      const std::vector<uint8_t> distinct =
          kernels::testing_util::RandomWeights(GgmlType::kF32, rows, n, rng);
      for (int r = 0; r < rows; ++r) {
        std::memcpy(w.data() + r * n * 4, distinct.data() + (r / copies) * n * 4, n * 4);
      }
      std::vector<float> x(n);
      std::uniform_real_distribution<float> val(-1.f, 1.f);
      for (float& v : x) v = val(rng);
      DeviceBuffer d_w = Upload(w), d_x = Upload(x), d_y = Upload(std::vector<float>(rows, 0.f));
      DeviceBuffer d_ids = Upload(std::vector<int32_t>(k + 1, -1));
      DeviceBuffer d_paired = Upload(std::vector<int32_t>(2 * k + 1, -1));
      DeviceBuffer d_wt = Upload(std::vector<float>(k + 1, 0.0f));
      DeviceBuffer d_counter = Upload(std::vector<int32_t>(1, 0));
      DecodeProjection p;
      p.in.x = d_x.as<const float>();
      p.in.n = n;
      p.m[0] = {static_cast<int>(GgmlType::kF32), d_w.data(), nullptr, rows, d_y.as<float>()};
      p.n_matrices = 1;
      p.topk = {k, d_ids.as<int32_t>(), d_wt.as<float>(), d_paired.as<int32_t>(),
                d_counter.as<int32_t>()};
      DecodeProject(p, nullptr);
      ASSERT_TRUE(LastLaunchError("DecodeProject").ok());
      ASSERT_TRUE(Synchronize(nullptr).ok());
      Outputs o;
      o.ids = Read<int32_t>(d_ids, k + 1);
      o.paired = Read<int32_t>(d_paired, 2 * k + 1);
      o.weights = Read(d_wt, k + 1);
      const std::vector<float> logits = Read(d_y, rows);
      const std::string name = "k=" + std::to_string(k) + " copies=" + std::to_string(copies);
      // The logits do tie (identical rows summed by the same lanes).
      int ties = 0;
      for (int r = 1; r < rows; ++r) ties += logits[r] == logits[r - 1] ? 1 : 0;
      EXPECT_GE(ties, rows / copies) << name;
      ExpectWarpRouting(logits, k, o, name);
      EXPECT_EQ(o.ids[k], -1) << name;
      EXPECT_EQ(Read<int32_t>(d_counter, 1)[0], 0) << name;
      // Runs of equal logits are taken whole, lowest id first.
      for (int s = 1; s < k; ++s) {
        if (logits[o.ids[s]] == logits[o.ids[s - 1]]) {
          EXPECT_GT(o.ids[s], o.ids[s - 1]) << name;
        }
      }
    }
  }
}

// The routed experts' gate/up: 8 slots of 5 experts' Q4_K rows (ff ending
// inside a row block), streamed against GateUpKernel.
// Device buffers of a routed gate/up launch: n_expert experts' Q4_K gate
// and up rows (ff x n), their tables, a random input, the slots' ids and
// the hidden rows.
struct GateUpBuffers {
  std::vector<DeviceBuffer> gates, ups;
  DeviceBuffer gate_table, up_table, xn, ids, h;
};

DecodeExperts GateUpArgs(int64_t n, int64_t ff, int n_expert, const std::vector<int32_t>& ids,
                         std::mt19937& rng, GateUpBuffers& b) {
  std::vector<const void*> gate_table, up_table;
  for (int x = 0; x < n_expert; ++x) {
    b.gates.push_back(Upload(kernels::testing_util::RandomWeights(GgmlType::kQ4_K, ff, n, rng)));
    b.ups.push_back(Upload(kernels::testing_util::RandomWeights(GgmlType::kQ4_K, ff, n, rng)));
    gate_table.push_back(b.gates.back().data());
    up_table.push_back(b.ups.back().data());
  }
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<float> xn(n);
  for (float& v : xn) v = val(rng);
  const int k = static_cast<int>(ids.size());
  b.gate_table = Upload(gate_table);
  b.up_table = Upload(up_table);
  b.xn = Upload(xn);
  b.ids = Upload(ids);
  b.h = Upload(std::vector<float>(k * ff, 0.0f));
  DecodeExperts e;
  e.k = k;
  e.ids = b.ids.as<const int32_t>();
  e.gate = b.gate_table.as<const void* const>();
  e.up = b.up_table.as<const void* const>();
  e.gate_type = e.up_type = static_cast<int>(GgmlType::kQ4_K);
  e.n_embd = n;
  e.ff = ff;
  e.xn = b.xn.as<const float>();
  e.h = b.h.as<float>();
  return e;
}

TEST_F(DecodeProjectSm90Test, RoutedGateUpStreamedAsUnstreamed) {
  std::mt19937 rng(9);
  const int64_t n = 2048, ff = 512 + 3;
  const int k = 8;
  GateUpBuffers b;
  DecodeExperts e = GateUpArgs(n, ff, 5, {3, 0, 4, 1, 1, 2, 0, 3}, rng, b);
  DeviceBuffer& d_h = b.h;
  auto launch = [&](bool streamed) {
    setenv("SLUICE_CUDA_STREAM_PROJECT", streamed ? "1" : "0", 1);
    EXPECT_EQ(DecodeExpertsGateUpStreamed(e), streamed);
    // All-ones bytes: a NaN wherever a row is left unwritten.
    EXPECT_TRUE(Memset(d_h.data(), 0xFF, k * ff * 4, nullptr).ok());
    DecodeExpertsGateUp(e, nullptr);
    EXPECT_TRUE(LastLaunchError("DecodeExpertsGateUp").ok());
    EXPECT_TRUE(Synchronize(nullptr).ok());
    return Read(d_h, k * ff);
  };
  const std::vector<float> blocks = launch(false), streamed = launch(true);
  ASSERT_EQ(std::memcmp(blocks.data(), streamed.data(), k * ff * 4), 0);
  // The same from xn prepared once.
  const int types[2] = {e.gate_type, e.up_type};
  const int formats = DecodeQ8Formats(types, 2, n);
  ASSERT_NE(formats, 0);
  DeviceBuffer d_q8 = Upload(std::vector<uint8_t>(DecodeQ8Bytes(formats, n), 0));
  DecodeInput in;
  in.x = e.xn;
  in.n = n;
  DecodePrepare(in, d_q8.as<uint8_t>(), formats, nullptr);
  e.xn_q8 = {d_q8.as<const uint8_t>(), formats};
  ASSERT_EQ(std::memcmp(blocks.data(), launch(false).data(), k * ff * 4), 0) << "prepared";
  ASSERT_EQ(std::memcmp(blocks.data(), launch(true).data(), k * ff * 4), 0)
      << "prepared, streamed";
  // Slots 3 and 4 route the same expert: the same rows.
  EXPECT_EQ(std::memcmp(&streamed[3 * ff], &streamed[4 * ff], ff * 4), 0);
  int unwritten = 0;
  for (float v : streamed) unwritten += std::isnan(v);
  EXPECT_EQ(unwritten, 0) << "rows left unwritten";
}

// Device buffers of a down launch: the routed slots' ids, routing weights,
// expert table and hidden rows, the shared expert's hidden row, matrix and
// gate logit, and the output.
struct DownBuffers {
  DeviceBuffer ids, weights, table, h, shared_h, shared_down, logit, out;
};

// The down launch's arguments over `b`: k slots of routed rows of
// `down_type` beside a shared expert of `shared_type`, n outputs of ff.
DecodeExperts DownArgs(int k, GgmlType down_type, GgmlType shared_type, int64_t n, int64_t ff,
                       DownBuffers& b) {
  DecodeExperts e;
  e.k = k;
  e.ids = b.ids.as<const int32_t>();
  e.weights = b.weights.as<const float>();
  e.down = b.table.as<const void* const>();
  e.gate_type = e.up_type = static_cast<int>(GgmlType::kQ4_K);
  e.down_type = static_cast<int>(down_type);
  e.n_embd = n;
  e.ff = ff;
  e.h = b.h.as<float>();
  e.shared_ff = ff;
  e.shared_h = b.shared_h.as<const float>();
  e.shared_down = b.shared_down.data();
  e.shared_down_type = static_cast<int>(shared_type);
  e.shared_logit = b.logit.as<const float>();
  e.out = b.out.as<float>();
  return e;
}

// The down products (8 routed slots of Q4_K rows, a Q8_0 shared expert, the
// host's rows added) read the same bits from their hidden rows quantized
// once (DecodeExpertsPrepareDown) as quantized in every block, and at 2 and
// 8 rows a lane group (SLUICE_CUDA_DOWN_ROWS) as at the default 4, in
// 2 or 4 passes a block (SLUICE_CUDA_DOWN_PASSES) as in one, and with the
// shared expert's product from a projection of its own (shared_y). With Q6_K
// routed rows (420 bytes: blocks of every alignment), the same bits with
// funnel loads (the default) as without (SLUICE_CUDA_FUNNEL_LOADS=0); and
// with Q1_0 rows (bench397's routed down type).
void CheckDown(GgmlType down_type) {
  SCOPED_TRACE(static_cast<int>(down_type));
  setenv("SLUICE_CUDA_FUNNEL_LOADS", "0", 1);
  PrepareDecodeKernels();
  std::mt19937 rng(12);
  const int64_t n = 2048, ff = 512;
  const int n_expert = 5, k = 8;
  std::vector<DeviceBuffer> downs;
  std::vector<const void*> table;
  for (int x = 0; x < n_expert; ++x) {
    downs.push_back(Upload(kernels::testing_util::RandomWeights(down_type, n, ff, rng)));
    table.push_back(downs.back().data());
  }
  DeviceBuffer d_shared =
      Upload(kernels::testing_util::RandomWeights(GgmlType::kQ8_0, n, ff, rng));
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<float> h(k * ff), sh(ff), host(k * n), w(k);
  for (float& v : h) v = val(rng);
  for (float& v : sh) v = val(rng);
  for (float& v : host) v = 0.1f * val(rng);
  for (float& v : w) v = 0.5f + 0.5f * val(rng);
  const float logit = 0.3f;
  DownBuffers b{Upload(std::vector<int32_t>{2, 0, 4, 1, 1, 3, 0, 2}), Upload(w), Upload(table),
                Upload(h), Upload(sh), std::move(d_shared),
                Upload(std::vector<float>{logit}), Upload(std::vector<float>(n, 0.0f))};
  DeviceBuffer d_host = Upload(host);
  DeviceBuffer& d_out = b.out;
  DecodeExperts e = DownArgs(k, down_type, GgmlType::kQ8_0, n, ff, b);
  e.host_y = d_host.as<const float>();
  auto launch = [&]() {
    EXPECT_TRUE(Memset(d_out.data(), 0xFF, n * 4, nullptr).ok());
    DecodeExpertsDown(e, nullptr);
    EXPECT_TRUE(LastLaunchError("DecodeExpertsDown").ok());
    EXPECT_TRUE(Synchronize(nullptr).ok());
    return Read(d_out, n);
  };
  const std::vector<float> floats = launch();
  const int types[2] = {e.down_type, e.shared_down_type};
  const int formats = DecodeQ8Formats(types, 2, ff);
  ASSERT_EQ(formats, DecodeQ8Formats(types, 1, ff) | DecodeQ8Formats(types + 1, 1, ff));
  DeviceBuffer d_q8 = Upload(std::vector<uint8_t>(DecodeQ8Bytes(formats, ff, k + 1), 0));
  DecodeExpertsPrepareDown(e, d_q8.as<uint8_t>(), formats, nullptr);
  e.h_q8 = {d_q8.as<const uint8_t>(), formats};
  const std::vector<float> prepared = launch();
  ASSERT_EQ(std::memcmp(floats.data(), prepared.data(), n * 4), 0);
  // The same bits as `floats`, from the prepared rows and from the floats.
  auto expect_same_bits = [&](const std::string& what) {
    EXPECT_EQ(std::memcmp(floats.data(), launch().data(), n * 4), 0) << what << ", prepared";
    const DecodeQ8 q8 = e.h_q8;
    e.h_q8 = {};
    EXPECT_EQ(std::memcmp(floats.data(), launch().data(), n * 4), 0) << what;
    e.h_q8 = q8;
  };
  // Fewer rows a block (more blocks), or several passes of rows a block.
  const std::pair<const char*, const char*> shapes[] = {{"SLUICE_CUDA_DOWN_ROWS", "2"},
                                                        {"SLUICE_CUDA_DOWN_ROWS", "8"},
                                                        {"SLUICE_CUDA_DOWN_PASSES", "2"},
                                                        {"SLUICE_CUDA_DOWN_PASSES", "4"}};
  for (const auto& [name, value] : shapes) {
    setenv(name, value, 1);
    expect_same_bits(std::string(name) + "=" + value);
    unsetenv(name);
  }
  // The shared expert's product from a projection of its own (shared_y).
  // Apart by default only beside Q1_0's routed rows (72 bytes against the
  // Q8_0 shared row's 544).
  EXPECT_EQ(DecodeExpertsSharedApart(e), down_type == GgmlType::kQ1_0);
  DeviceBuffer d_shared_y = Upload(std::vector<float>(n, 0.0f));
  DecodeProjection shared_down;
  shared_down.in.x = b.shared_h.as<const float>();
  shared_down.in.n = ff;
  shared_down.m[0] = {static_cast<int>(GgmlType::kQ8_0), e.shared_down, nullptr, n,
                      d_shared_y.as<float>()};
  shared_down.n_matrices = 1;
  DecodeProject(shared_down, nullptr);
  ASSERT_TRUE(LastLaunchError("DecodeProject").ok());
  e.shared_y = d_shared_y.as<const float>();
  expect_same_bits("shared apart");
  e.shared_y = nullptr;
  unsetenv("SLUICE_CUDA_FUNNEL_LOADS");  // the default: on
  PrepareDecodeKernels();
  const std::vector<float> funnel = launch();
  e.h_q8 = {};
  const std::vector<float> funnel_floats = launch();
  ASSERT_EQ(std::memcmp(floats.data(), funnel.data(), n * 4), 0) << "funnel loads";
  ASSERT_EQ(std::memcmp(floats.data(), funnel_floats.data(), n * 4), 0) << "funnel loads";
  int unwritten = 0;
  double sum = 0;
  for (float v : prepared) {
    unwritten += std::isnan(v);
    sum += v * v;
  }
  EXPECT_EQ(unwritten, 0);
  EXPECT_GT(sum, 0.0);
}

TEST_F(DecodeProjectSm90Test, DownFromPreparedRowsAsFromFloats) {
  CheckDown(GgmlType::kQ4_K);
  CheckDown(GgmlType::kQ6_K);
  CheckDown(GgmlType::kQ1_0);
}

// A shared expert whose down type has no 8-bit product (F16) beside Q4_K
// routed rows: its warp reads its hidden row as floats while the routed
// warps quantize theirs, and the launch agrees with a double-precision sum
// over the dequantized weights (to the 8-bit activations' rounding), the
// same bits at 2, 4 and 8 rows a lane group.
TEST_F(DecodeProjectSm90Test, DownWithAFloatSharedExpert) {
  std::mt19937 rng(31);
  const int64_t n = 1024, ff = 512;
  const int n_expert = 3, k = 4;
  const GgmlType routed = GgmlType::kQ4_K, shared = GgmlType::kF16;
  std::vector<std::vector<uint8_t>> host_downs;
  std::vector<DeviceBuffer> downs;
  std::vector<const void*> table;
  for (int x = 0; x < n_expert; ++x) {
    host_downs.push_back(kernels::testing_util::RandomWeights(routed, n, ff, rng));
    downs.push_back(Upload(host_downs.back()));
    table.push_back(downs.back().data());
  }
  const std::vector<uint8_t> host_shared = kernels::testing_util::RandomWeights(shared, n, ff, rng);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<float> h(k * ff), sh(ff), w(k);
  for (float& v : h) v = val(rng);
  for (float& v : sh) v = val(rng);
  for (float& v : w) v = 0.5f + 0.5f * val(rng);
  const float logit = -0.4f;
  const std::vector<int32_t> ids = {2, 0, 2, 1};
  DownBuffers b{Upload(ids), Upload(w), Upload(table), Upload(h), Upload(sh), Upload(host_shared),
                Upload(std::vector<float>{logit}), Upload(std::vector<float>(n, 0.0f))};
  DeviceBuffer& d_out = b.out;
  const DecodeExperts e = DownArgs(k, routed, shared, n, ff, b);
  ASSERT_TRUE(DecodeExpertsSupported(k, true, ff, n));
  auto launch = [&](const char* rows) {
    setenv("SLUICE_CUDA_DOWN_ROWS", rows, 1);
    EXPECT_TRUE(Memset(d_out.data(), 0xFF, n * 4, nullptr).ok());
    DecodeExpertsDown(e, nullptr);
    EXPECT_TRUE(LastLaunchError("DecodeExpertsDown").ok());
    EXPECT_TRUE(Synchronize(nullptr).ok());
    unsetenv("SLUICE_CUDA_DOWN_ROWS");
    return Read(d_out, n);
  };
  const std::vector<float> out = launch("4");
  // The reference: every row dequantized, summed in double.
  auto dot = [&](GgmlType t, const std::vector<uint8_t>& m, int64_t row, const float* x) {
    std::vector<float> r(ff);
    const int64_t row_bytes = static_cast<int64_t>(m.size()) / n;
    EXPECT_TRUE(kernels::DequantizeRow(t, m.data() + row * row_bytes, ff, r.data()).ok());
    double sum = 0;
    for (int64_t i = 0; i < ff; ++i) sum += static_cast<double>(r[i]) * x[i];
    return sum;
  };
  const double gate = 1.0 / (1.0 + std::exp(-static_cast<double>(logit)));
  double worst = 0, scale = 0;
  for (int64_t row = 0; row < n; ++row) {
    double want = gate * dot(shared, host_shared, row, sh.data());
    for (int x = 0; x < k; ++x) want += w[x] * dot(routed, host_downs[ids[x]], row, &h[x * ff]);
    worst = std::max(worst, std::fabs(want - out[row]));
    scale = std::max(scale, std::fabs(want));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 0.02 * scale);
  for (const char* rows : {"2", "8"}) {
    EXPECT_EQ(std::memcmp(out.data(), launch(rows).data(), n * 4), 0) << rows << " rows";
  }
}

// The streamed gate/up launch that quantizes the down launch's rows as it
// completes them (bench35's shape: 8 slots of Q4_K gate/up, ff 512, Q6_K
// routed down beside a Q8_0 shared one, so both 8-bit formats) writes the
// bytes DecodeExpertsPrepareDown writes from the same rows, the same h,
// and leaves its counters zero, twice in a row (the second launch finds
// the counters the first left). Only with counters, and at this ff (512)
// only with SLUICE_CUDA_GATE_UP_Q8=1 (by default from 1,024 rows).
TEST_F(DecodeProjectSm90Test, GateUpQuantizesTheDownRowsAsPrepareDown) {
  std::mt19937 rng(41);
  const int64_t n = 2048, ff = 512;
  const int k = 8;
  GateUpBuffers b;
  DecodeExperts e = GateUpArgs(n, ff, 6, {3, 0, 5, 1, 1, 2, 4, 3}, rng, b);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<float> sh(ff);
  for (float& v : sh) v = val(rng);
  DeviceBuffer d_sh = Upload(sh);
  e.down_type = static_cast<int>(GgmlType::kQ6_K);
  e.shared_ff = ff;
  e.shared_h = d_sh.as<const float>();
  e.shared_down_type = static_cast<int>(GgmlType::kQ8_0);
  const int formats = DecodeExpertsDownFormats(e);
  ASSERT_EQ(formats, DecodeQ8Formats(std::vector<int>{e.down_type, e.shared_down_type}.data(), 2, ff));
  const int64_t q8_bytes = DecodeQ8Bytes(formats, ff, k + 1);
  DeviceBuffer d_fused = Upload(std::vector<uint8_t>(q8_bytes, 0));
  DeviceBuffer d_prepared = Upload(std::vector<uint8_t>(q8_bytes, 0));
  DeviceBuffer d_counters = Upload(std::vector<int32_t>(k, 0));
  e.h_q8 = {d_fused.as<const uint8_t>(), formats};
  e.h_counters = d_counters.as<int32_t>();
  ASSERT_TRUE(DecodeExpertsGateUpStreamed(e));
  EXPECT_FALSE(DecodeExpertsGateUpQuantizes(e)) << "off by default below 1,024 rows";
  setenv("SLUICE_CUDA_GATE_UP_Q8", "1", 1);
  ASSERT_TRUE(DecodeExpertsGateUpQuantizes(e));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE(Memset(d_fused.data(), 0, q8_bytes, nullptr).ok());
    DecodeExpertsGateUp(e, nullptr);
    ASSERT_TRUE(LastLaunchError("DecodeExpertsGateUp").ok());
    DecodeExpertsPrepareDown(e, d_prepared.as<uint8_t>(), formats, nullptr);
    ASSERT_TRUE(LastLaunchError("DecodeExpertsPrepareDown").ok());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    const std::vector<uint8_t> fused = Read<uint8_t>(d_fused, q8_bytes);
    const std::vector<uint8_t> prepared = Read<uint8_t>(d_prepared, q8_bytes);
    EXPECT_EQ(std::memcmp(fused.data(), prepared.data(), q8_bytes), 0);
    // Something was written (SiLU(g) u quantizes to many zero bytes: 4,167
    // of 11,664 nonzero on the H100, run 19).
    int nonzero = 0;
    for (uint8_t b : fused) nonzero += b != 0;
    EXPECT_GT(nonzero, q8_bytes / 8);
    for (int32_t c : Read<int32_t>(d_counters, k)) EXPECT_EQ(c, 0);
  }
  e.h_counters = nullptr;
  EXPECT_FALSE(DecodeExpertsGateUpQuantizes(e));
  unsetenv("SLUICE_CUDA_GATE_UP_Q8");
}

// AttendDecode against Attend (ops.h) for one gated token of bench35's
// attention (16 q heads over 2 KV heads of 256) at several positions: a
// short cache (its q heads spread over blocks of two) and one over 16 MiB
// (every q head of a KV head in one block). The kernels sum in different
// orders, so the outputs agree to float rounding, not in bits; the
// counters are left zero.
void CheckAttendDecode(int capacity, std::vector<int> positions) {
  AttentionShape s;
  s.n_head = 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.gated = true;
  s.kv_capacity = capacity;
  ASSERT_TRUE(AttendDecodeSupports(s));
  ASSERT_LE(capacity, AttentionMaxCapacity());
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  const int64_t kv = s.n_head_kv * s.head_dim, qw = 2 * s.n_head * s.head_dim;
  const int64_t ow = s.n_head * s.head_dim;
  std::vector<float> q(qw), k(capacity * kv), v(capacity * kv);
  for (float& x : q) x = val(rng);
  for (float& x : k) x = 0.2f * val(rng);
  for (float& x : v) x = val(rng);
  DeviceBuffer d_q = Upload(q), d_k = Upload(k), d_v = Upload(v);
  DeviceBuffer d_pos = Upload(std::vector<int32_t>{0});
  DeviceBuffer d_ref = Upload(std::vector<float>(ow, 0.0f));
  DeviceBuffer d_o = Upload(std::vector<float>(ow, 0.0f));
  DeviceBuffer d_scratch = Upload(std::vector<float>(AttendDecodeScratchFloats(s), 0.0f));
  DeviceBuffer d_counters = Upload(std::vector<int32_t>(AttendDecodeCounters(s), 0));
  for (int pos : positions) {
    ASSERT_TRUE(CopyToDevice(d_pos.data(), &pos, 4, nullptr).ok());
    Attend(s, d_q.as<const float>(), d_k.as<const float>(), d_v.as<const float>(),
           d_pos.as<const int32_t>(), 1, d_ref.as<float>(), nullptr);
    AttendDecode(s, d_q.as<const float>(), d_k.as<const float>(), d_v.as<const float>(),
                 d_pos.as<const int32_t>(), d_scratch.as<float>(), d_counters.as<int32_t>(),
                 d_o.as<float>(), nullptr);
    ASSERT_TRUE(LastLaunchError("AttendDecode").ok());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    const std::vector<float> ref = Read(d_ref, ow), o = Read(d_o, ow);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < ow; ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(ref[i] - o[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
    }
    EXPECT_GT(scale, 0.0) << "capacity " << capacity << " position " << pos;
    EXPECT_LE(worst, 1e-5 * scale) << "capacity " << capacity << " position " << pos;
    for (int32_t c : Read<int32_t>(d_counters, AttendDecodeCounters(s))) ASSERT_EQ(c, 0);
  }
}

TEST_F(DecodeProjectSm90Test, AttendDecodeShortCacheMatchesAttend) {
  CheckAttendDecode(656, {0, 1, 31, 300, 655});
}

TEST_F(DecodeProjectSm90Test, AttendDecodeLongCacheMatchesAttend) {
  CheckAttendDecode(4608, {0, 700, 4607});
}

// A shape the fused DeltaNet launches take: state 128, 4 conv taps.
DeltaNetShape FusedShape(int n_k_heads, int n_v_heads) {
  DeltaNetShape s;
  s.state_size = 128;
  s.n_k_heads = n_k_heads;
  s.n_v_heads = n_v_heads;
  s.conv_kernel = 4;
  s.eps = 1e-6f;
  return s;
}

// n values offset + scale x, x uniform in [-1, 1).
std::vector<float> Uniform(std::mt19937& rng, int64_t n, float scale, float offset) {
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = offset + scale * val(rng);
  return v;
}

// DeltaNetDecodeFused against DeltaNetDecodePrep + DeltaNetScan (one
// token) as bits: o, the recurrent state and the conv state, over three
// steps (each reads the states the last wrote), for k heads read by 1, 2, 4
// and 8 v heads (4, 4, 2 and 1 blocks a v head).
void CheckDeltaFused(int n_k_heads, int n_v_heads) {
  const DeltaNetShape s = FusedShape(n_k_heads, n_v_heads);
  ASSERT_TRUE(DeltaNetDecodeFusedSupports(s)) << n_k_heads << "/" << n_v_heads;
  std::mt19937 rng(11 + n_v_heads);
  auto random = [&](int64_t n, float scale, float offset = 0.0f) {
    return Uniform(rng, n, scale, offset);
  };
  const int ch = s.channels(), R = s.n_v_heads, S = s.state_size;
  const std::vector<float> kernel = random(int64_t{ch} * s.conv_kernel, 0.5f);
  const std::vector<float> dt_bias = random(R, 0.5f), a = random(R, 0.5f, -1.0f);
  const std::vector<float> norm = random(S, 0.25f, 1.0f);
  const std::vector<float> conv0 = random(int64_t{ch} * (s.conv_kernel - 1), 1.0f);
  const std::vector<float> ssm0 = random(int64_t{R} * S * S, 0.1f);
  DeviceBuffer d_kernel = Upload(kernel), d_dt = Upload(dt_bias), d_a = Upload(a);
  DeviceBuffer d_norm = Upload(norm);
  DeviceBuffer conv_ref = Upload(conv0), conv_fused = Upload(conv0);
  DeviceBuffer ssm_ref = Upload(ssm0), ssm_fused = Upload(ssm0);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> qkv = random(ch, 1.0f), z = random(s.value_dim(), 1.0f);
    const std::vector<float> beta = random(R, 2.0f), alpha = random(R, 2.0f);
    DeviceBuffer d_qkv = Upload(qkv), d_qkv_ref = Upload(qkv), d_z = Upload(z);
    DeviceBuffer d_beta = Upload(beta), d_alpha = Upload(alpha);
    DeviceBuffer d_beta_ref = Upload(beta), d_alpha_ref = Upload(alpha);
    DeviceBuffer o_ref = Upload(std::vector<float>(s.value_dim(), 0.0f));
    DeviceBuffer o_fused = Upload(std::vector<float>(s.value_dim(), 0.0f));
    DeltaNetDecodePrep(s, d_beta_ref.as<float>(), d_alpha_ref.as<float>(), d_dt.as<const float>(),
                       d_a.as<const float>(), d_kernel.as<const float>(), d_qkv_ref.as<float>(),
                       conv_ref.as<float>(), nullptr);
    DeltaNetScan(s, d_qkv_ref.as<const float>(), d_beta_ref.as<const float>(),
                 d_alpha_ref.as<const float>(), d_z.as<const float>(), d_norm.as<const float>(), 1,
                 ssm_ref.as<float>(), o_ref.as<float>(), nullptr);
    DeltaNetDecodeFused(s, d_qkv.as<const float>(), d_beta.as<const float>(),
                        d_alpha.as<const float>(), d_dt.as<const float>(), d_a.as<const float>(),
                        d_kernel.as<const float>(), d_z.as<const float>(), d_norm.as<const float>(),
                        conv_fused.as<float>(), ssm_fused.as<float>(), o_fused.as<float>(),
                        nullptr);
    ASSERT_TRUE(LastLaunchError("DeltaNetDecodeFused").ok());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    const std::vector<float> o1 = Read(o_ref, s.value_dim()), o2 = Read(o_fused, s.value_dim());
    const std::vector<float> c1 = Read(conv_ref, conv0.size()), c2 = Read(conv_fused, conv0.size());
    const std::vector<float> s1 = Read(ssm_ref, ssm0.size()), s2 = Read(ssm_fused, ssm0.size());
    const std::vector<float> q_in = Read(d_qkv, ch);
    EXPECT_EQ(std::memcmp(q_in.data(), qkv.data(), 4 * qkv.size()), 0) << "qkv is only read";
    double scale = 0;
    for (float v : o1) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    EXPECT_GT(scale, 0.0);
    EXPECT_EQ(std::memcmp(o1.data(), o2.data(), 4 * o1.size()), 0)
        << n_k_heads << "/" << n_v_heads << " step " << step << ": o";
    EXPECT_EQ(std::memcmp(c1.data(), c2.data(), 4 * c1.size()), 0)
        << n_k_heads << "/" << n_v_heads << " step " << step << ": conv state";
    EXPECT_EQ(std::memcmp(s1.data(), s2.data(), 4 * s1.size()), 0)
        << n_k_heads << "/" << n_v_heads << " step " << step << ": recurrent state";
  }
}

TEST_F(DecodeProjectSm90Test, DeltaNetFusedAsPrepAndScan) {
  CheckDeltaFused(16, 32);  // bench35: two v heads a k head, 4 blocks each
  CheckDeltaFused(3, 3);
  CheckDeltaFused(2, 8);  // 2 blocks a v head
  CheckDeltaFused(1, 8);  // 1 block a v head
  DeltaNetShape s64;
  s64.state_size = 64;
  s64.n_k_heads = s64.n_v_heads = 2;
  s64.conv_kernel = 4;
  EXPECT_FALSE(DeltaNetDecodeFusedSupports(s64));  // state size 128 only
}

// DeltaNetDecodeFusedSeqs against the batch pass's launches on the same
// one-row sequences (DeltaNetGates, DeltaNetConvSeqs, DeltaNetScanSeqs) as
// bits: o and every sequence's conv and recurrent state, over two steps;
// qkv, beta and alpha only read.
void CheckDeltaFusedSeqs(int n_k_heads, int n_v_heads, int n_seqs) {
  const DeltaNetShape s = FusedShape(n_k_heads, n_v_heads);
  ASSERT_TRUE(DeltaNetDecodeFusedSupports(s)) << n_k_heads << "/" << n_v_heads;
  std::mt19937 rng(31 + n_v_heads + n_seqs);
  auto random = [&](int64_t n, float scale, float offset = 0.0f) {
    return Uniform(rng, n, scale, offset);
  };
  const int ch = s.channels(), R = s.n_v_heads, S = s.state_size, vd = s.value_dim();
  const int64_t conv_n = int64_t{ch} * (s.conv_kernel - 1), ssm_n = int64_t{R} * S * S;
  DeviceBuffer d_kernel = Upload(random(int64_t{ch} * s.conv_kernel, 0.5f));
  DeviceBuffer d_dt = Upload(random(R, 0.5f)), d_a = Upload(random(R, 0.5f, -1.0f));
  DeviceBuffer d_norm = Upload(random(S, 0.25f, 1.0f));
  // Each sequence's states, twice (the reference's and the fused launch's).
  std::vector<DeviceBuffer> states;
  std::vector<SeqState> ref_states, fused_states;
  for (int i = 0; i < n_seqs; ++i) {
    const std::vector<float> conv0 = random(conv_n, 1.0f), ssm0 = random(ssm_n, 0.1f);
    for (int copy = 0; copy < 2; ++copy) {
      states.push_back(Upload(conv0));
      states.push_back(Upload(ssm0));
      const SeqState st{states[states.size() - 2].as<float>(), states.back().as<float>()};
      (copy == 0 ? ref_states : fused_states).push_back(st);
    }
  }
  std::vector<SeqRows> rows;
  std::vector<int32_t> row_seq;
  for (int i = 0; i < n_seqs; ++i) {
    rows.push_back({i, 1, 7 + i, 0});
    row_seq.push_back(i);
  }
  DeviceBuffer d_rows = Upload(rows), d_row_seq = Upload(row_seq);
  DeviceBuffer d_ref_states = Upload(ref_states), d_fused_states = Upload(fused_states);
  const SeqBatch b_ref{n_seqs, d_rows.as<const SeqRows>(), d_row_seq.as<const int32_t>(),
                       d_ref_states.as<const SeqState>()};
  const SeqBatch b_fused{n_seqs, d_rows.as<const SeqRows>(), d_row_seq.as<const int32_t>(),
                         d_fused_states.as<const SeqState>()};
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> qkv = random(int64_t{n_seqs} * ch, 1.0f);
    const std::vector<float> z = random(int64_t{n_seqs} * vd, 1.0f);
    const std::vector<float> beta = random(int64_t{n_seqs} * R, 2.0f);
    const std::vector<float> alpha = random(int64_t{n_seqs} * R, 2.0f);
    DeviceBuffer d_qkv = Upload(qkv), d_qkv_ref = Upload(qkv), d_z = Upload(z);
    DeviceBuffer d_beta = Upload(beta), d_alpha = Upload(alpha);
    DeviceBuffer d_beta_ref = Upload(beta), d_alpha_ref = Upload(alpha);
    const std::vector<float> zeros(int64_t{n_seqs} * vd, 0.0f);
    DeviceBuffer o_ref = Upload(zeros), o_fused = Upload(zeros);
    DeltaNetGates(s, d_beta_ref.as<float>(), d_alpha_ref.as<float>(), d_dt.as<const float>(),
                  d_a.as<const float>(), n_seqs, nullptr);
    DeltaNetConvSeqs(s, d_kernel.as<const float>(), d_qkv_ref.as<float>(), b_ref, n_seqs,
                     nullptr);
    DeltaNetScanSeqs(s, d_qkv_ref.as<const float>(), d_beta_ref.as<const float>(),
                     d_alpha_ref.as<const float>(), d_z.as<const float>(),
                     d_norm.as<const float>(), b_ref, o_ref.as<float>(), nullptr);
    DeltaNetDecodeFusedSeqs(s, d_qkv.as<const float>(), d_beta.as<const float>(),
                            d_alpha.as<const float>(), d_dt.as<const float>(),
                            d_a.as<const float>(), d_kernel.as<const float>(),
                            d_z.as<const float>(), d_norm.as<const float>(), b_fused,
                            o_fused.as<float>(), nullptr);
    ASSERT_TRUE(LastLaunchError("DeltaNetDecodeFusedSeqs").ok());
    ASSERT_TRUE(Synchronize(nullptr).ok());
    const std::string at = std::to_string(n_k_heads) + "/" + std::to_string(n_v_heads) + " x " +
                           std::to_string(n_seqs) + " step " + std::to_string(step);
    const std::vector<float> o1 = Read(o_ref, zeros.size()), o2 = Read(o_fused, zeros.size());
    double scale = 0;
    for (float v : o1) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    EXPECT_GT(scale, 0.0) << at;
    EXPECT_EQ(std::memcmp(o1.data(), o2.data(), 4 * o1.size()), 0) << at << ": o";
    EXPECT_EQ(Read(d_qkv, qkv.size()), qkv) << at << ": qkv is only read";
    EXPECT_EQ(Read(d_beta, beta.size()), beta) << at << ": beta is only read";
    EXPECT_EQ(Read(d_alpha, alpha.size()), alpha) << at << ": alpha is only read";
    for (int i = 0; i < n_seqs; ++i) {
      const DeviceBuffer& c1 = states[4 * i];
      const DeviceBuffer& c2 = states[4 * i + 2];
      const DeviceBuffer& s1 = states[4 * i + 1];
      const DeviceBuffer& s2 = states[4 * i + 3];
      const std::vector<float> a1 = Read(c1, conv_n), a2 = Read(c2, conv_n);
      const std::vector<float> r1 = Read(s1, ssm_n), r2 = Read(s2, ssm_n);
      EXPECT_EQ(std::memcmp(a1.data(), a2.data(), 4 * a1.size()), 0)
          << at << ": conv state of sequence " << i;
      EXPECT_EQ(std::memcmp(r1.data(), r2.data(), 4 * r1.size()), 0)
          << at << ": recurrent state of sequence " << i;
    }
  }
}

TEST_F(DecodeProjectSm90Test, DeltaNetFusedOverOneRowSequencesAsTheBatchLaunches) {
  CheckDeltaFusedSeqs(16, 32, 5);  // bench35: 4 blocks a v head
  CheckDeltaFusedSeqs(16, 64, 3);  // bench397: 2 blocks a v head
  CheckDeltaFusedSeqs(1, 8, 2);    // 1 block a v head
}

TEST_F(DecodeProjectSm90Test, RowsOfF32AreNotStreamed) {
  // An F32 row block of 2048 columns (64 KiB) does not fit the stages: the
  // launch keeps the one-block-per-row-block kernel.
  std::mt19937 rng(5);
  DeviceBuffer w = Upload(kernels::testing_util::RandomWeights(GgmlType::kF32, 16, 2048, rng));
  DecodeProjection p;
  p.in.n = 2048;
  p.n_matrices = 1;
  p.m[0].type = static_cast<int>(GgmlType::kF32);
  p.m[0].w = w.data();
  p.m[0].rows = 16;
  EXPECT_FALSE(DecodeProjectStreamed(p));
}


// Programmatic dependent launches (the default on sm_90) give the bits of
// plain ones, replay after replay: six MoE layers of bench35's shapes (the
// F32 router with its top-k beside the shared pair and the shared gate,
// the routed gate/up, the down products, each layer's input the last one's
// output plus the residual) captured as one graph and replayed 20 times,
// with SLUICE_CUDA_PDL=0 and with the default, and with the gate/up launch
// quantizing the down launch's rows both ways. A kernel that read its
// predecessor's output before waiting for it would give other bits.
TEST_F(DecodeProjectSm90Test, ProgrammaticLaunchesGiveThePlainBits) {
  std::mt19937 rng(31);
  const int64_t n = 2048, ff = 512;
  const int n_expert = 16, k = 8, layers = 6;
  using kernels::testing_util::RandomWeights;
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  auto random_floats = [&](size_t count, float scale) {
    std::vector<float> v(count);
    for (float& f : v) f = scale * val(rng);
    return v;
  };
  DeviceBuffer router = Upload(random_floats(n_expert * n, 0.05f));
  DeviceBuffer shared_gate_w = Upload(random_floats(n, 0.05f));
  DeviceBuffer sh_gate = Upload(RandomWeights(GgmlType::kQ4_K, ff, n, rng));
  DeviceBuffer sh_up = Upload(RandomWeights(GgmlType::kQ4_K, ff, n, rng));
  DeviceBuffer sh_down = Upload(RandomWeights(GgmlType::kQ4_K, n, ff, rng));
  std::vector<DeviceBuffer> experts;
  std::vector<const void*> gate_t, up_t, down_t;
  for (int x = 0; x < n_expert; ++x) {
    experts.push_back(Upload(RandomWeights(GgmlType::kQ4_K, ff, n, rng)));
    gate_t.push_back(experts.back().data());
    experts.push_back(Upload(RandomWeights(GgmlType::kQ4_K, ff, n, rng)));
    up_t.push_back(experts.back().data());
    experts.push_back(Upload(RandomWeights(GgmlType::kQ6_K, n, ff, rng)));
    down_t.push_back(experts.back().data());
  }
  DeviceBuffer d_gt = Upload(gate_t), d_ut = Upload(up_t), d_dt = Upload(down_t);
  const std::vector<float> x0 = random_floats(n, 1.0f);
  DeviceBuffer d_x[2] = {Upload(x0), Upload(std::vector<float>(n, 0.0f))};
  DeviceBuffer d_norm = Upload(random_floats(n, 0.25f));
  DeviceBuffer d_out = Upload(std::vector<float>(n, 0.0f));
  DeviceBuffer d_xn = Upload(std::vector<float>(n, 0.0f));
  DeviceBuffer d_logits = Upload(std::vector<float>(n_expert, 0.0f));
  DeviceBuffer d_sh = Upload(std::vector<float>(ff, 0.0f));
  DeviceBuffer d_sh_logit = Upload(std::vector<float>(1, 0.0f));
  DeviceBuffer d_h = Upload(std::vector<float>(k * ff, 0.0f));
  DeviceBuffer d_ids = Upload(std::vector<int32_t>(k, 0));
  DeviceBuffer d_paired = Upload(std::vector<int32_t>(2 * k, 0));
  DeviceBuffer d_w = Upload(std::vector<float>(k, 0.0f));
  DeviceBuffer d_counter = Upload(std::vector<int32_t>(1, 0));
  DeviceBuffer d_h_q8 = Upload(std::vector<uint8_t>(DecodeQ8MaxBytes(ff, k + 1), 0));
  DeviceBuffer d_h_counters = Upload(std::vector<int32_t>(k, 0));
  // out = the last layer's MoE output; x alternates between the two buffers.
  // fused: the gate/up launch quantizes the down launch's rows.
  auto enqueue = [&](Stream stream, bool fused) {
    for (int l = 0; l < layers; ++l) {
      DecodeProjection p;
      p.in.x = d_x[l % 2].as<const float>();
      p.in.add = d_out.as<const float>();
      p.in.x_out = d_x[(l + 1) % 2].as<float>();
      p.in.norm_w = d_norm.as<const float>();
      p.in.eps = 1e-6f;
      p.in.xn_out = d_xn.as<float>();
      p.in.n = n;
      p.n_matrices = 3;
      p.m[0] = {static_cast<int>(GgmlType::kF32), router.data(), nullptr, n_expert,
                d_logits.as<float>()};
      p.m[1] = {static_cast<int>(GgmlType::kQ4_K), sh_gate.data(), sh_up.data(), ff,
                d_sh.as<float>()};
      p.m[2] = {static_cast<int>(GgmlType::kF32), shared_gate_w.data(), nullptr, 1,
                d_sh_logit.as<float>()};
      p.topk = {k, d_ids.as<int32_t>(), d_w.as<float>(), d_paired.as<int32_t>(),
                d_counter.as<int32_t>()};
      DecodeProject(p, stream);
      DecodeExperts e;
      e.k = k;
      e.ids = d_ids.as<const int32_t>();
      e.weights = d_w.as<const float>();
      e.gate = d_gt.as<const void* const>();
      e.up = d_ut.as<const void* const>();
      e.down = d_dt.as<const void* const>();
      e.gate_type = e.up_type = static_cast<int>(GgmlType::kQ4_K);
      e.down_type = static_cast<int>(GgmlType::kQ6_K);
      e.n_embd = n;
      e.ff = ff;
      e.xn = d_xn.as<const float>();
      e.h = d_h.as<float>();
      e.shared_ff = ff;
      e.shared_h = d_sh.as<const float>();
      e.shared_down = sh_down.data();
      e.shared_down_type = static_cast<int>(GgmlType::kQ4_K);
      e.shared_logit = d_sh_logit.as<const float>();
      e.out = d_out.as<float>();
      if (fused) {
        e.h_q8 = {d_h_q8.as<const uint8_t>(), DecodeExpertsDownFormats(e)};
        e.h_counters = d_h_counters.as<int32_t>();
        EXPECT_TRUE(DecodeExpertsGateUpQuantizes(e));
      }
      DecodeExpertsGateUp(e, stream);
      DecodeExpertsDown(e, stream);
    }
  };
  absl::StatusOr<Stream> stream = CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  // The final residual stream and MoE output of each replay.
  auto replays = [&](const char* pdl, bool fused) {
    setenv("SLUICE_CUDA_PDL", pdl, 1);
    setenv("SLUICE_CUDA_GATE_UP_Q8", fused ? "1" : "0", 1);
    PrepareDecodeKernels();
    EXPECT_TRUE(Graph::BeginCapture(*stream).ok());
    enqueue(*stream, fused);
    absl::StatusOr<Graph> graph = Graph::EndCapture(*stream);
    EXPECT_TRUE(graph.ok()) << graph.status();
    EXPECT_EQ(graph->kernels(), 3 * layers);
    std::vector<std::vector<float>> outs;
    for (int r = 0; r < 20 && graph.ok(); ++r) {
      EXPECT_TRUE(CopyToDevice(d_x[0].data(), x0.data(), n * 4, *stream).ok());
      EXPECT_TRUE(Memset(d_out.data(), 0, n * 4, *stream).ok());
      EXPECT_TRUE(graph->Launch(*stream).ok());
      EXPECT_TRUE(Synchronize(*stream).ok());
      std::vector<float> o = Read(d_out, n), x = Read(d_x[layers % 2], n);
      o.insert(o.end(), x.begin(), x.end());
      outs.push_back(std::move(o));
    }
    unsetenv("SLUICE_CUDA_PDL");
    unsetenv("SLUICE_CUDA_GATE_UP_Q8");
    PrepareDecodeKernels();
    return outs;
  };
  const std::vector<std::vector<float>> plain = replays("0", false), pdl = replays("1", false);
  const std::vector<std::vector<float>> fused = replays("0", true), fused_pdl = replays("1", true);
  ASSERT_EQ(plain.size(), 20u);
  ASSERT_EQ(pdl.size(), 20u);
  ASSERT_EQ(fused.size(), 20u);
  ASSERT_EQ(fused_pdl.size(), 20u);
  double sum = 0;
  int nans = 0;
  for (float v : plain[0]) {
    sum += static_cast<double>(v) * v;
    nans += std::isnan(v);
  }
  EXPECT_GT(sum, 0.0);
  EXPECT_EQ(nans, 0);
  for (int r = 0; r < 20; ++r) {
    ASSERT_EQ(std::memcmp(plain[0].data(), plain[r].data(), 2 * n * 4), 0) << "plain replay " << r;
    ASSERT_EQ(std::memcmp(plain[0].data(), pdl[r].data(), 2 * n * 4), 0) << "PDL replay " << r;
    ASSERT_EQ(std::memcmp(plain[0].data(), fused[r].data(), 2 * n * 4), 0)
        << "replay " << r << ", rows quantized by the gate/up launch";
    ASSERT_EQ(std::memcmp(plain[0].data(), fused_pdl[r].data(), 2 * n * 4), 0)
        << "PDL replay " << r << ", rows quantized by the gate/up launch";
  }
  for (int32_t c : Read<int32_t>(d_h_counters, k)) EXPECT_EQ(c, 0);
  DestroyStream(*stream);
}

// The decode program records the routing read-back's event with
// RecordEventInGraph; run eagerly (generate --profile) that record was
// refused (cudaErrorIllegalState, run 17): outside a capture it is a plain
// record now, inside one still a node the host can wait for.
TEST_F(DecodeProjectSm90Test, EventInGraphRecordsWithAndWithoutACapture) {
  absl::StatusOr<Stream> stream = CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<Event> event = CreateEvent();
  ASSERT_TRUE(event.ok()) << event.status();
  const absl::Status eager = RecordEventInGraph(*event, *stream);
  EXPECT_TRUE(eager.ok()) << eager;
  EXPECT_TRUE(WaitEvent(*event).ok());
  ASSERT_TRUE(Graph::BeginCapture(*stream).ok());
  const absl::Status captured = RecordEventInGraph(*event, *stream);
  absl::StatusOr<Graph> graph = Graph::EndCapture(*stream);
  EXPECT_TRUE(captured.ok()) << captured;
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(graph->Launch(*stream).ok());
  EXPECT_TRUE(WaitEvent(*event).ok());
  EXPECT_TRUE(Synchronize(*stream).ok());
  DestroyEvent(*event);
  DestroyStream(*stream);
}

}  // namespace
}  // namespace sluice::cuda
