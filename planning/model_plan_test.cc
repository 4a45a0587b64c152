#include "planning/model_plan.h"

#include <string>

#include "gtest/gtest.h"
#include "loader/testing/gguf_bytes.h"

namespace sluice::planning {
namespace {

// A dense F32 model of two tensors (352 bytes): token_embd 8 x 10 and
// output_norm 8.
std::string WriteDenseModel() {
  sluice::testing::GgufBytes b;
  b.Header(3, /*n_tensors=*/2, /*n_kv=*/0)
      .TensorInfo("token_embd.weight", {8, 10}, /*F32*/ 0, 0)
      .TensorInfo("output_norm.weight", {8}, /*F32*/ 0, 320)
      .PadTo(32)
      .Zeros(352);
  const std::string path = sluice::testing::MakeTempDir() + "/m.gguf";
  sluice::testing::WriteFileOrDie(path, b.bytes());
  return path;
}

// Every figure given, so nothing depends on this host.
PlanRequest Request(const std::string& path) {
  PlanRequest r;
  r.model_path = path;
  r.context_length = 64;
  r.sessions = 2;
  r.device_bytes = 1ull << 30;
  r.host_bytes = 16ull << 30;
  return r;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ModelPlanTest, PrintsTheModelTheContextAndThePlan) {
  const std::string path = WriteDenseModel();
  const PlanReport report = PlanModelFile(Request(path));
  ASSERT_EQ(report.failure, PlanFailure::kNone) << report.message;
  const std::string& t = report.text;
  EXPECT_EQ(t.rfind("model                  " + path + " (1 shard(s), 2 tensors)\n"
                    "context                64 tokens x 2 session(s)\n"
                    "mode                   all-resident\n",
                    0),
            0u)
      << t;
  EXPECT_TRUE(Contains(t, "device                 1.00 GiB free of 1.00 GiB\n")) << t;
  EXPECT_TRUE(Contains(t, "host                   16.00 GiB available of 16.00 GiB\n")) << t;
  // memory::Rates' defaults where no rate is given.
  EXPECT_TRUE(Contains(t, "  read from disk       352 B / 1.50 GB/s")) << t;
  EXPECT_TRUE(Contains(t, "  copy to device       352 B / 55.20 GB/s")) << t;
  EXPECT_TRUE(Contains(t, "uniform routing")) << t;
}

TEST(ModelPlanTest, AKvPoolIsPlannedAsThePool) {
  PlanRequest r = Request(WriteDenseModel());
  r.kv_pool_tokens = 96;
  const PlanReport report = PlanModelFile(r);
  ASSERT_EQ(report.failure, PlanFailure::kNone) << report.message;
  // No attention block: nothing per token and no KV buffer to round.
  EXPECT_TRUE(Contains(report.text, "  KV pool              96 tokens x 0 B + pages rounding 0 B\n"))
      << report.text;
}

TEST(ModelPlanTest, GivenRatesReplaceTheDefaults) {
  PlanRequest r = Request(WriteDenseModel());
  r.disk_bytes_per_s = 3e9;
  r.pcie_bytes_per_s = 10e9;
  r.hbm_bytes_per_s = 1e12;
  const PlanReport report = PlanModelFile(r);
  ASSERT_EQ(report.failure, PlanFailure::kNone) << report.message;
  EXPECT_TRUE(Contains(report.text, "  read from disk       352 B / 3.00 GB/s")) << report.text;
  EXPECT_TRUE(Contains(report.text, "  copy to device       352 B / 10.00 GB/s")) << report.text;
  EXPECT_TRUE(Contains(report.text, "  HBM (dense + routed) 352 B / 1.00 TB/s")) << report.text;
}

TEST(ModelPlanTest, AMissingModelFailsAtTheModel) {
  PlanRequest r = Request("/nonexistent/m.gguf");
  const PlanReport report = PlanModelFile(r);
  EXPECT_EQ(report.failure, PlanFailure::kModel);
  EXPECT_TRUE(Contains(report.message, "/nonexistent/m.gguf")) << report.message;
  EXPECT_EQ(report.text, "");
}

TEST(ModelPlanTest, ADeviceBelowTheMarginIsRefused) {
  PlanRequest r = Request(WriteDenseModel());
  r.device_bytes = 100ull << 20;  // the margin alone is 512 MiB
  const PlanReport report = PlanModelFile(r);
  EXPECT_EQ(report.failure, PlanFailure::kRefused);
  EXPECT_TRUE(Contains(report.message,
                       "device memory oversubscribed: the plan needs 512.3 MiB (dense 352 B"))
      << report.message;
  EXPECT_TRUE(Contains(report.message, "but the device has 100.0 MiB free of 100.0 MiB"))
      << report.message;
  EXPECT_EQ(report.text, "");
}

TEST(ModelPlanTest, AMissingProfileFailsAtTheProfile) {
  PlanRequest r = Request(WriteDenseModel());
  r.expert_profile = "/nonexistent/profile.slep";
  const PlanReport report = PlanModelFile(r);
  EXPECT_EQ(report.failure, PlanFailure::kProfile);
  EXPECT_TRUE(Contains(report.message, "/nonexistent/profile.slep")) << report.message;
  EXPECT_EQ(report.text, "");
}

}  // namespace
}  // namespace sluice::planning
