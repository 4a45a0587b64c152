// Reading a tokenizer vocabulary from GGUF metadata.
//
// Keys read (llama.cpp's names): tokenizer.ggml.model (required, must be
// "gpt2"), tokenizer.ggml.pre (must be "qwen2" or "qwen35"; absent reads as
// "default", which is rejected), tokenizer.ggml.tokens (required),
// tokenizer.ggml.token_type (optional: all normal), tokenizer.ggml.merges
// (required), tokenizer.ggml.{bos,eos,padding}_token_id (optional: -1) and
// tokenizer.ggml.add_bos_token (optional: false).
//
// Errors name the file, the key and the offending value, e.g.
//   m.gguf: unsupported tokenizer model "llama" (tokenizer.ggml.model); ...
// NotFound for a missing required key, InvalidArgument for a wrong value.
#ifndef SLUICE_MODEL_TOKENIZER_GGUF_H_
#define SLUICE_MODEL_TOKENIZER_GGUF_H_

#include <memory>

#include "absl/status/statusor.h"
#include "loader/gguf_file.h"
#include "model/tokenizer.h"

namespace sluice {

absl::StatusOr<VocabData> VocabFromGguf(const GgufFile& file);

// VocabFromGguf followed by Tokenizer::Create, errors prefixed by the file.
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromGguf(
    const GgufFile& file);

}  // namespace sluice

#endif  // SLUICE_MODEL_TOKENIZER_GGUF_H_
