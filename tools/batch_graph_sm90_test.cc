// A batch's decode steps from captured graphs (CudaModel::BatchByGraph,
// EnqueueBatch's capture mode) against the same steps run eagerly (a
// profiled model captures nothing), on the CUDA backend with every expert
// resident: for 3, 5, 9, 17 and 33 sequences (the last two past
// kTensorCoreMinEntries, WideBatchGraphsEnabled) of different prompt
// lengths, each greedy step's logits bit for bit, and the experts each
// block acquired (counted from the bounds the graph copies out) equal.
// Models: the qwen3moe and qwen35moe (attention and Gated DeltaNet) F32
// goldens and deepseek2's (latent attention). Needs a CUDA device and the
// goldens; skips elsewhere with the marker tests/run_all.sh counts.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/testing/goldens.h"
#include "base/testing/skip.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device.h"
#include "loader/model_files.h"
#include "model/cuda/batch_pass.h"
#include "model/engine.h"
#include "tools/cuda_parity_testing.h"

namespace sluice {
namespace {

struct Run {
  std::vector<float> logits;        // every step's, every sequence's
  std::vector<int32_t> experts;     // every step's experts_per_layer
  bool graph = false;               // Stats().decode_graph
};

// Prompts of 3 + 2i tokens for sequence i, one pass of all of them, then
// `steps` batched greedy decode steps.
Run Decode(const std::string& path, bool profile, int n_seqs, int steps) {
  Run out;
  auto files = ModelFiles::Open(path);
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return out;
  EngineOptions o;
  o.backend = Backend::kCuda;
  o.profile = profile;
  auto model = LoadModel(**files, o);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return out;
  const int64_t vocab = (*model)->info().n_vocab;
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<std::vector<int32_t>> tokens(n_seqs);
  for (int i = 0; i < n_seqs; ++i) {
    auto st = (*model)->CreateState(96);
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return out;
    states.push_back(std::move(*st));
    for (int j = 0; j < 3 + 2 * i; ++j) {
      tokens[i].push_back(static_cast<int32_t>((1 + 37 * i + 11 * j) % vocab));
    }
  }
  std::vector<float> logits;
  for (int step = 0; step <= steps; ++step) {
    std::vector<BatchChunk> chunks(n_seqs);
    for (int i = 0; i < n_seqs; ++i) {
      chunks[i].state = states[i].get();
      chunks[i].position = states[i]->position();
      chunks[i].tokens = tokens[i];
      chunks[i].rows = LogitRows::kLast;
    }
    auto stats = (*model)->ForwardBatch(chunks, &logits);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return out;
    if (step > 0) {  // the decode steps (the first pass is the prompts)
      out.logits.insert(out.logits.end(), logits.begin(), logits.end());
      out.experts.insert(out.experts.end(), stats->experts_per_layer.begin(),
                         stats->experts_per_layer.end());
    }
    for (int i = 0; i < n_seqs; ++i) {
      const auto row = logits.begin() + i * vocab;
      tokens[i] = {static_cast<int32_t>(std::max_element(row, row + vocab) - row)};
    }
  }
  out.graph = (*model)->Stats().decode_graph;
  return out;
}

void ExpectGraphsMatchEagerSteps(const std::string& path) {
  // (Two decode through the fused program one at a time where it applies:
  // TwoSequencesDecodeAsAlone.)
  // 17 and 33 sequences: graphs past kTensorCoreMinEntries rows, which
  // WideBatchGraphsEnabled turns on.
  SetWideBatchGraphsEnabled(true);
  for (const int n : {3, 5, 9, 17, 33}) {
    const Run graph = Decode(path, /*profile=*/false, n, 6);
    const Run eager = Decode(path, /*profile=*/true, n, 6);
    ASSERT_FALSE(graph.logits.empty());
    ASSERT_EQ(graph.logits.size(), eager.logits.size());
    int differ = 0;
    for (size_t i = 0; i < graph.logits.size(); ++i) differ += graph.logits[i] != eager.logits[i];
    const int64_t acquired = std::accumulate(graph.experts.begin(), graph.experts.end(),
                                             int64_t{0});
    const int64_t eager_acquired =
        std::accumulate(eager.experts.begin(), eager.experts.end(), int64_t{0});
    std::printf("%s, %d sequences, 6 steps: decode_graph=%d, %d of %zu logits differ, "
                "experts acquired %lld (eager %lld)\n",
                path.c_str(), n, graph.graph ? 1 : 0, differ, graph.logits.size(),
                static_cast<long long>(acquired), static_cast<long long>(eager_acquired));
    EXPECT_TRUE(graph.graph);
    EXPECT_FALSE(eager.graph);
    EXPECT_EQ(differ, 0) << n << " sequences";
    EXPECT_EQ(graph.experts, eager.experts) << n << " sequences";
    EXPECT_GT(acquired, 0);
  }
}

TEST(BatchGraphSm90Test, QwenStepsEqualTheEagerOnes) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectGraphsMatchEagerSteps(dir + "/qwen3moe-micro-f32.gguf");
  ExpectGraphsMatchEagerSteps(dir + "/qwen35moe-micro-f32.gguf");
  // Quantized experts: the grouped products' 8-bit paths.
  ExpectGraphsMatchEagerSteps(dir + "/qwen35moe-tiny-mixed.gguf");
}

TEST(BatchGraphSm90Test, Deepseek2StepsEqualTheEagerOnes) {
  SLUICE_REQUIRE_GOLDENS_DEEPSEEK2(dir);
  SLUICE_REQUIRE_DEVICE();
  ExpectGraphsMatchEagerSteps(dir + "/deepseek2-micro-f32.gguf");
}

// Two one-row sequences of a model with a decode program, every expert
// resident (CudaModel::DecodesEachAlone): each step of the pair gives each
// sequence the logits it gets decoding alone, bit for bit, and 2 x k
// experts a MoE block acquired.
TEST(BatchGraphSm90Test, TwoSequencesDecodeAsAlone) {
  SLUICE_REQUIRE_GOLDENS(dir);
  SLUICE_REQUIRE_DEVICE();
  auto files = ModelFiles::Open(dir + "/qwen35moe-micro-f32.gguf");
  ASSERT_TRUE(files.ok()) << files.status();
  EngineOptions o;
  o.backend = Backend::kCuda;
  auto model = LoadModel(**files, o);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t vocab = (*model)->info().n_vocab;
  std::vector<std::unique_ptr<SequenceState>> pair, alone;
  std::vector<int32_t> next = {5, 77};
  std::vector<float> logits;
  for (int i = 0; i < 2; ++i) {
    for (auto* v : {&pair, &alone}) {
      auto st = (*model)->CreateState(64);
      ASSERT_TRUE(st.ok()) << st.status();
      const std::vector<int32_t> prompt = {1, static_cast<int32_t>(10 + i), 30, 7};
      ASSERT_TRUE((*model)->Forward(prompt, **st, LogitRows::kLast, &logits).ok());
      v->push_back(std::move(*st));
    }
  }
  int differ = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<BatchChunk> chunks(2);
    for (int i = 0; i < 2; ++i) {
      chunks[i].state = pair[i].get();
      chunks[i].position = pair[i]->position();
      chunks[i].tokens = absl::MakeConstSpan(&next[i], 1);
      chunks[i].rows = LogitRows::kLast;
    }
    auto stats = (*model)->ForwardBatch(chunks, &logits);
    ASSERT_TRUE(stats.ok()) << stats.status();
    ASSERT_EQ(logits.size(), static_cast<size_t>(2 * vocab));
    const int64_t k = (*model)->info().n_expert_used;
    for (int32_t e : stats->experts_per_layer) EXPECT_TRUE(e == 0 || e == 2 * k) << e;
    std::vector<int32_t> following(2);
    for (int i = 0; i < 2; ++i) {
      std::vector<float> own;
      ASSERT_TRUE(
          (*model)->Forward({&next[i], 1}, *alone[i], LogitRows::kLast, &own).ok());
      for (int64_t j = 0; j < vocab; ++j) differ += own[j] != logits[i * vocab + j];
      following[i] = static_cast<int32_t>(
          std::max_element(own.begin(), own.end()) - own.begin());
    }
    next = following;
  }
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace sluice
