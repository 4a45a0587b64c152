// Turns a trained model's raw export (train/train_demo.py) into a qwen3moe
// GGUF through mkmodel's writer, so a trained file has exactly the keys,
// tensor names, shapes, order and per-tensor types of the generated ones
// (model/testing/mkmodel.h, WriteModelWithValues).
//
// The export is a directory with
//   weights.json    {"config": {"arch": "qwen3moe", "n_vocab", "n_embd",
//                   "n_layer", "n_head", "n_head_kv", "head_dim",
//                   "n_expert", "n_expert_used", "expert_ff",
//                   "context_length", "rms_eps", "rope_freq_base"},
//                   "tensors": [{"name", "ne" (ggml order), "offset"}...]}
//   weights.bin     little-endian f32 data at those byte offsets
//   tokenizer.json  {"model": "gpt2", "pre": "qwen2", "tokens",
//                   "token_types", "merges", "bos_token_id", "eos_token_id"}
// Every tensor of the model must be there exactly once with the GGUF shape;
// none may be left over.
//
// Thread-safety: reentrant.
#ifndef SLUICE_TOOLS_IMPORT_WEIGHTS_LIB_H_
#define SLUICE_TOOLS_IMPORT_WEIGHTS_LIB_H_

#include <string>

#include "absl/status/status.h"
#include "format/ggml_type.h"

namespace sluice::tools {

struct ImportOptions {
  std::string export_dir;  // holds weights.json, weights.bin, tokenizer.json
  std::string out_path;    // the GGUF to write
  // Weight matrices take this type (f32 or q8_0; norms and routers stay
  // F32, as mkmodel writes them).
  GgmlType type = GgmlType::kQ8_0;
  std::string name;  // general.name
};

// Errors: NotFound for a missing file; InvalidArgument naming the file and
// field for a malformed manifest or tokenizer (an architecture other than
// qwen3moe, a tokenizer other than gpt2/qwen2, a vocabulary without
// mkmodel's layout, a tensor missing, repeated, left over, of another
// shape or past the end of weights.bin); the writer's errors.
absl::Status ImportWeights(const ImportOptions& options);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_IMPORT_WEIGHTS_LIB_H_
