#include "model/tokenizer_gguf.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace sluice {
namespace {

// An optional token id: -1 when absent; InvalidArgument when it does not fit
// an int32 (GetU32 names the file, key and value).
absl::StatusOr<int32_t> OptionalId(const GgufFile& file, const char* key) {
  if (file.Find(key) == nullptr) return -1;
  ASSIGN_OR_RETURN(const uint32_t id, file.GetU32(key));
  if (id > static_cast<uint32_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: metadata key \"%s\": value %d is not a token id", file.file_name(),
        key, id));
  }
  return static_cast<int32_t>(id);
}

}  // namespace

absl::StatusOr<VocabData> VocabFromGguf(const GgufFile& file) {
  VocabData vocab;
  ASSIGN_OR_RETURN(vocab.model, file.GetString("tokenizer.ggml.model"));
  if (vocab.model != "gpt2") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unsupported tokenizer model \"%s\" (tokenizer.ggml.model); only "
        "\"gpt2\" (byte-level BPE) is supported",
        file.file_name(), vocab.model));
  }
  ASSIGN_OR_RETURN(vocab.pre,
                   file.GetStringOr("tokenizer.ggml.pre", "default"));
  if (vocab.pre != "qwen2" && vocab.pre != "qwen35") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unsupported pre-tokenizer \"%s\" (tokenizer.ggml.pre); "
        "supported: \"qwen2\", \"qwen35\"",
        file.file_name(), vocab.pre));
  }
  ASSIGN_OR_RETURN(const absl::Span<const std::string> tokens,
                   file.GetArrayString("tokenizer.ggml.tokens"));
  vocab.tokens.assign(tokens.begin(), tokens.end());
  if (file.Find("tokenizer.ggml.token_type") != nullptr) {
    ASSIGN_OR_RETURN(vocab.token_types,
                     file.GetArrayI32("tokenizer.ggml.token_type"));
  }
  ASSIGN_OR_RETURN(const absl::Span<const std::string> merges,
                   file.GetArrayString("tokenizer.ggml.merges"));
  vocab.merges.assign(merges.begin(), merges.end());
  ASSIGN_OR_RETURN(vocab.bos, OptionalId(file, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(vocab.eos, OptionalId(file, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(vocab.pad,
                   OptionalId(file, "tokenizer.ggml.padding_token_id"));
  ASSIGN_OR_RETURN(vocab.add_bos,
                   file.GetBoolOr("tokenizer.ggml.add_bos_token", false));
  return vocab;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromGguf(
    const GgufFile& file) {
  ASSIGN_OR_RETURN(VocabData vocab, VocabFromGguf(file));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::Create(std::move(vocab));
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(file.file_name(), ": ",
                                     tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace sluice
