// --routing: which experts the tools' forward passes use (issue 22). The
// default, "router", is the model's own routing. Any other value replaces
// the router's choice through model/trace_routing.h, so a benchmark moves,
// caches and computes the experts of a known routing:
//   trace:FILE          a recorded trace (generate --record_trace) of this
//                       model's shape;
//   uniform | zipf:S | cyclic | realistic[:zipf=S,reuse=R,spread=D] |
//   mixed[:wave=W,every=N,...]
//                       a synthetic trace of tools/slotsim_lib.h made for
//                       the model's shape, seeded by --routing_seed.
// The router's weights are kept; only the experts they weight change.
#ifndef SLUICE_TOOLS_ROUTING_FLAG_H_
#define SLUICE_TOOLS_ROUTING_FLAG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loader/model_files.h"
#include "model/trace_routing.h"

namespace sluice::tools {

// The flag as given ("router" by default), for reports.
std::string RoutingFlag();

// Null for "router". A synthetic kind is made `tokens` tokens long (the
// source starts again from its first token after them). Errors:
// InvalidArgument naming --routing for an unknown kind or a bad knob, the
// trace reader's for a bad file; a trace of another shape is refused when
// the engine is built (TraceRouting::Bind).
absl::StatusOr<std::unique_ptr<TraceRouting>> RoutingFromFlags(const ModelFiles& files,
                                                               int64_t tokens);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_ROUTING_FLAG_H_
