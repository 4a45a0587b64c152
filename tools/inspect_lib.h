// The GGUF dump behind //tools:inspect, as a library so tests can call it.
//
// Thread-safety: stateless functions.
#ifndef SLUICE_TOOLS_INSPECT_LIB_H_
#define SLUICE_TOOLS_INSPECT_LIB_H_

#include <ostream>
#include <string>

#include "loader/model_files.h"

namespace sluice::inspect {

// "tensors=N bytes=B dense_bytes=D expert_bytes=E shards=S" (B = D + E, the
// sum of the tensors' byte sizes).
std::string SummaryLine(const ModelFiles& files);

// Writes the dump of `files`: per shard its header and metadata (arrays show
// their first `max_array_elements` elements), then the tensor table; with
// `summary_only`, just the shard list. The last line is SummaryLine().
void Dump(const ModelFiles& files, bool summary_only, int max_array_elements,
          std::ostream& out);

}  // namespace sluice::inspect

#endif  // SLUICE_TOOLS_INSPECT_LIB_H_
