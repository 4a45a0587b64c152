// ExpertConfig in the worker's Hello (sluice.worker.v1.WorkerConfig, fields
// expert_* and host_tier_bytes) and back: the supervisor writes it, the
// worker reads it. A separate target from expert_config because it needs
// the generated proto.
#ifndef SLUICE_CONFIG_EXPERT_CONFIG_PROTO_H_
#define SLUICE_CONFIG_EXPERT_CONFIG_PROTO_H_

#include "absl/status/statusor.h"
#include "config/expert_config.h"
#include "proto/sluice/worker/v1/worker.pb.h"

namespace sluice::config {

// Sets the expert fields of `out` (expert_slots only when not -1: unset
// means the planner chooses).
void ToWorkerConfig(const ExpertConfig& config, sluice::worker::v1::WorkerConfig* out);

// The expert fields of `in` ("" policies: the defaults). InvalidArgument
// naming the field ("Hello.config.expert_miss_policy: unknown expert miss
// policy ...") for an unknown name or a value ValidateExpertConfig refuses.
absl::StatusOr<ExpertConfig> FromWorkerConfig(const sluice::worker::v1::WorkerConfig& in);

}  // namespace sluice::config

#endif  // SLUICE_CONFIG_EXPERT_CONFIG_PROTO_H_
