// ChatML conversation formatting (the format of Qwen's chat models):
//
//   <|im_start|>system\nYou are ...<|im_end|>\n
//   <|im_start|>user\nHello<|im_end|>\n
//   <|im_start|>assistant\n            <- add_generation_prompt
//
// Only the plain ChatML frame is produced: no default system prompt, no
// tool-call or "thinking" markup.
//
// Prompt injection: a message whose content contains "<|im_end|>" must not
// be able to close its turn. FormatChatML() returns text, which is only safe
// to tokenize with parse_special=false for the contents; EncodeChatML() does
// that split itself and is what the serving path should use.
//
// Thread-safety: all functions are pure.
#ifndef SLUICE_MODEL_CHAT_TEMPLATE_H_
#define SLUICE_MODEL_CHAT_TEMPLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/tokenizer.h"

namespace sluice {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The ChatML text of `messages`, plus "<|im_start|>assistant\n" when
// `add_generation_prompt`. InvalidArgument naming the message index and the
// role when a role is not one of the three above.
absl::StatusOr<std::string> FormatChatML(absl::Span<const ChatMessage> messages,
                                         bool add_generation_prompt);

// Token ids of the same conversation: <|im_start|> and <|im_end|> as their
// control tokens, everything else encoded with parse_special=false, so
// special-token text inside a content stays text. When no content contains
// special-token text the ids equal
// tokenizer.Encode(FormatChatML(...), /*parse_special=*/true).
// InvalidArgument for a bad role (as above) or when the vocabulary lacks
// <|im_start|> or <|im_end|>.
absl::StatusOr<std::vector<int32_t>> EncodeChatML(
    const Tokenizer& tokenizer, absl::Span<const ChatMessage> messages,
    bool add_generation_prompt);

}  // namespace sluice

#endif  // SLUICE_MODEL_CHAT_TEMPLATE_H_
