// The decode program's runner in eager mode (no CUDA call is made, so this
// runs on any machine): ops and host actions in program order, segments
// split at the cuts, errors from either stop the step where they happen.
// The capture and replay of the same program run on the GPU machine
// (tools:cuda_parity_sm90_test, every decode row of it).
#include "model/cuda/decode_program.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

class Recorder : public DecodeProgram::Host {
 public:
  explicit Recorder(std::vector<std::string>* log) : log_(log) {}
  absl::Status Run(const HostAction& a) override {
    log_->push_back(absl::StrCat(a.kind == HostAction::kRouting ? "route" : "host", a.layer));
    return fail_layer_ == a.layer ? absl::InternalError("acquire failed") : absl::OkStatus();
  }
  int fail_layer_ = -1;

 private:
  std::vector<std::string>* log_;
};

DecodeOp Op(std::string label, std::vector<std::string>* log,
            absl::Status result = absl::OkStatus()) {
  return {label, 10, [label, log, result](cuda::Stream) {
            log->push_back(label);
            return result;
          }};
}

DecodeProgram TwoLayers(std::vector<std::string>* log) {
  DecodeProgram p;
  p.Add(Op("embed", log));
  p.Add(Op("0.route", log));
  p.Cut({HostAction::kRouting, 0});
  p.Add(Op("0.gate_up", log));
  p.Cut({HostAction::kHostExperts, 0});
  p.Add(Op("0.down", log));
  p.Add(Op("1.route", log));
  p.Cut({HostAction::kRouting, 1});
  p.Add(Op("head", log));
  return p;
}

TEST(DecodeProgramTest, EagerRunsOpsAndHostActionsInProgramOrder) {
  std::vector<std::string> log;
  DecodeProgram p = TwoLayers(&log);
  Recorder host(&log);
  EXPECT_EQ(p.segments(), 4);
  ASSERT_TRUE(p.Run(nullptr, /*graph=*/false, host).ok());
  const std::vector<std::string> want = {"embed",   "0.route", "route0", "0.gate_up", "host0",
                                         "0.down",  "1.route", "route1", "head"};
  EXPECT_EQ(log, want);
  EXPECT_FALSE(p.captured());
  EXPECT_EQ(p.launches(), 0);  // counted only from captured graphs
  log.clear();
  ASSERT_TRUE(p.Run(nullptr, false, host).ok());
  EXPECT_EQ(log, want);  // a step is repeatable
}

TEST(DecodeProgramTest, AFailingOpEndsTheStepThere) {
  std::vector<std::string> log;
  DecodeProgram p;
  p.Add(Op("a", &log));
  p.Add(Op("b", &log, absl::InternalError("launch failed: b")));
  p.Add(Op("c", &log));
  p.Cut({HostAction::kRouting, 0});
  p.Add(Op("d", &log));
  Recorder host(&log);
  const absl::Status s = p.Run(nullptr, false, host);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "launch failed: b");
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b"}));
}

TEST(DecodeProgramTest, AFailingHostActionEndsTheStepThere) {
  std::vector<std::string> log;
  DecodeProgram p = TwoLayers(&log);
  Recorder host(&log);
  host.fail_layer_ = 1;
  const absl::Status s = p.Run(nullptr, false, host);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "acquire failed");
  EXPECT_EQ(log.back(), "route1");
  EXPECT_EQ(log.size(), 8u);  // "head" never ran
}

// Host actions that take known times: the runner files each under its
// kind, and a step's whole time holds them.
class SlowHost : public DecodeProgram::Host {
 public:
  absl::Status Run(const HostAction& a) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(a.kind == HostAction::kRouting ? 3 : 1));
    return absl::OkStatus();
  }
};

TEST(DecodeProgramTest, StepsAddTheirHostTimesByKind) {
  std::vector<std::string> log;
  DecodeProgram p = TwoLayers(&log);
  SlowHost host;
  DecodeHostTimes t;
  ASSERT_TRUE(p.Run(nullptr, false, host, &t).ok());
  ASSERT_TRUE(p.Run(nullptr, false, host).ok());  // not counted
  ASSERT_TRUE(p.Run(nullptr, false, host, &t).ok());
  EXPECT_EQ(t.steps, 2);
  // Two routing actions (3 ms each) and one host share (1 ms) a step.
  EXPECT_GE(t.routing_s, 2 * 2 * 0.003);
  EXPECT_GE(t.host_experts_s, 2 * 0.001);
  EXPECT_LT(t.host_experts_s, t.routing_s);
  EXPECT_GE(t.step_s, t.routing_s + t.host_experts_s + t.launch_s);
  EXPECT_EQ(t.routing_wait_s, 0);  // the host's own measure
}

}  // namespace
}  // namespace sluice
