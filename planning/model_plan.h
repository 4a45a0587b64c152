// The offline plan of a model file: what the worker's fit planner
// (memory/fit_planner.h) would decide for it on a host, from the GGUF header
// and tensor table only (the weights are mapped, never read), with the
// cold-start time and the decode-rate bound (memory::ColdStartOf,
// memory::DecodeEstimateOf). `sluicectl plan` prints it before any daemon
// runs.
//
// This room sits above memory/ and loader/ and is the one room below wire/
// that clients/ may see besides proto/ and config/ (layers.bzl
// PLANNING_USERS): its interface names no type of memory/ or loader/, so
// clients/ states what it wants in plain figures and gets text back. The
// planner itself stays the worker's own.
//
// Thread-safety: PlanModelFile may be called concurrently (it shares nothing).
#ifndef SLUICE_PLANNING_MODEL_PLAN_H_
#define SLUICE_PLANNING_MODEL_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "config/expert_config.h"

namespace sluice::planning {

// What to plan. Figures left unset are found on this host (memory) or are
// memory::Rates' defaults (rates).
struct PlanRequest {
  std::string model_path;  // the first (or only) shard
  int64_t context_length = 0;  // tokens per session; >= 1
  int64_t sessions = 0;        // >= 1
  // The worker's KV pool in positions (sluiced --kv_cache_tokens); 0:
  // every session its whole context.
  int64_t kv_pool_tokens = 0;
  // The expert settings as sluiced takes them, validated by the caller
  // (config::ValidateExpertConfig); slots -1 and arena_fraction 0: the
  // planner chooses.
  config::ExpertConfig experts;
  // The device's memory, all of it free. Unset: the first GPU's total and
  // free memory from nvidia-smi (a process, not a link: nothing here links
  // CUDA), unknown where there is no nvidia-smi or no GPU.
  std::optional<uint64_t> device_bytes;
  // The host's memory, all of it available. Unset: /proc/meminfo.
  std::optional<uint64_t> host_bytes;
  // Bytes per second (> 0). Unset: memory::Rates' defaults.
  std::optional<double> disk_bytes_per_s;
  std::optional<double> pcie_bytes_per_s;
  std::optional<double> hbm_bytes_per_s;
  // A saved usage profile (memory/expert_profile.h): the decode estimate's
  // tier shares come from its counts. Unset: uniform routing.
  std::optional<std::string> expert_profile;
};

// Where a request stopped; the caller's wording and exit status depend on it.
enum class PlanFailure {
  kNone,
  kHostProbe,  // the host's memory could not be read
  kModel,      // the model could not be opened, or its figures read
  kRefused,    // the fit planner refused: the request does not fit
  kProfile,    // the usage profile could not be read, or is another model's
};

struct PlanReport {
  PlanFailure failure = PlanFailure::kNone;
  std::string message;  // why, when failure != kNone (names the file or figure)
  // When failure == kNone: the model (path, shards, tensors) and context
  // lines, then memory::Plan::Table(), the cold start's and the decode
  // estimate's tables.
  std::string text;
};

// Host probes first, then the model: the steps run in PlanFailure's order
// and the first failure ends the request.
PlanReport PlanModelFile(const PlanRequest& request);

}  // namespace sluice::planning

#endif  // SLUICE_PLANNING_MODEL_PLAN_H_
