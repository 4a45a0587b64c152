// The keys of `generate --json` that bench/ and earlier results.json files
// read (docs/BENCHMARKS.md, "generate --json").
#include "tools/generate_report.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::tools {
namespace {

GenerateReport CudaReport() {
  GenerateReport r;
  r.device = "cuda";
  r.stats.device_memory = {{"dense", 1000}, {"expert_arena", 200}, {"workspace", 30}};
  r.kv_state_bytes = 4;
  r.stats.device_in_use_measured = 1500;
  return r;
}

// The backend names the arena "expert_arena", as the metric does; by_kind
// keeps the key it was published with, and its kinds sum to accounted_bytes.
TEST(GenerateReportTest, DeviceMemoryKeepsPublishedKindKeys) {
  const std::string json = GenerateReportJson(CudaReport());
  EXPECT_NE(json.find("\"device_memory\":{\"by_kind\":{\"dense\":1000,\"experts\":200,"
                      "\"workspace\":30,\"kv_state\":4},\"accounted_bytes\":1234,"
                      "\"in_use_measured_bytes\":1500,\"peak_bytes\":1500,"),
            std::string::npos)
      << json;
  EXPECT_EQ(json.find("expert_arena"), std::string::npos) << json;
}

TEST(GenerateReportTest, CpuRunHasNoDeviceKinds) {
  GenerateReport r;
  r.kv_state_bytes = 4;
  const std::string json = GenerateReportJson(r);
  EXPECT_NE(json.find("\"device_memory\":{\"by_kind\":{},\"accounted_bytes\":0,"),
            std::string::npos)
      << json;
}

// A streaming run reports the host tier it has and the fewest bytes one
// would take, so that an operator sizes --host_tier_bytes from a first run.
TEST(GenerateReportTest, ExpertsReportTheHostTierAndItsMinimum) {
  GenerateReport r = CudaReport();
  r.stats.experts.streaming = true;
  r.stats.experts.host_tier_bytes = 1 << 20;
  r.stats.experts.host_tier_min_bytes = 983040;
  const std::string json = GenerateReportJson(r);
  EXPECT_NE(json.find("\"host_tier_bytes\":1048576,\"host_tier_min_bytes\":983040,"),
            std::string::npos)
      << json;
}

// The miss policy's estimates of both paths, the host's fixed cost and the
// smoothed saving that turns the host path on (`cost` gave the host 21 of
// 6,066 misses in run 17 with a host rate estimated at 117 GB/s: these say
// why).
TEST(GenerateReportTest, ExpertsReportTheMissPolicysEstimates) {
  GenerateReport r = CudaReport();
  r.stats.experts.streaming = true;
  r.stats.experts.copy_bytes_per_s = 5e10;
  r.stats.experts.host_bytes_per_s = 1.25e11;
  r.stats.experts.host_fixed_s = 0.00025;
  r.stats.experts.host_path_saving_s = 0.5;
  const std::string json = GenerateReportJson(r);
  EXPECT_NE(json.find("\"copy_bytes_per_s_estimate\":5e+10,"
                      "\"host_bytes_per_s_estimate\":1.25e+11,"
                      "\"host_fixed_s_estimate\":0.00025,\"host_path_saving_s\":0.5,"),
            std::string::npos)
      << json;
}

// Where the host's time went, per replayed decode step in microseconds,
// and the host's product calls by size (their mean microseconds).
TEST(GenerateReportTest, DecodeHostTimesArePerStep) {
  GenerateReport r = CudaReport();
  DecodeHostTimes& t = r.stats.decode_host;
  t.steps = 4;
  t.step_s = 0.008;
  t.launch_s = 0.0002;
  t.routing_s = 0.006;
  t.routing_wait_s = 0.005;
  t.host_experts_s = 0.0012;
  t.host_calls[0] = 2;
  t.host_call_s[0] = 0.001;
  t.host_calls[2] = 4;
  t.host_call_s[2] = 0.0008;
  const std::string json = GenerateReportJson(r);
  EXPECT_NE(json.find("\"decode_host_us\":{\"steps\":4,\"step\":2000,\"launch\":50,"
                      "\"routing_wait\":1250,\"acquire\":250,\"host_experts\":300,"
                      "\"host_calls\":{\"one\":2,\"two_three\":0,\"four_up\":4},"
                      "\"host_call_us_mean\":{\"one\":500,\"two_three\":0,\"four_up\":200}}"),
            std::string::npos)
      << json;
}

// Page faults of prefill and decode, as measured.
TEST(GenerateReportTest, PageFaultsOfPrefillAndDecode) {
  GenerateReport r = CudaReport();
  r.prefill_faults = {1200, 3};
  r.decode_faults = {431, 0};
  const std::string json = GenerateReportJson(r);
  EXPECT_NE(json.find("\"page_faults\":{\"prefill\":{\"minor\":1200,\"major\":3},"
                      "\"decode\":{\"minor\":431,\"major\":0}},"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace sluice::tools
