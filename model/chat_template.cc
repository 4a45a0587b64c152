#include "model/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

constexpr char kImStart[] = "<|im_start|>";
constexpr char kImEnd[] = "<|im_end|>";

absl::Status CheckRoles(absl::Span<const ChatMessage> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chat message %d: role \"%s\" is not one of \"system\", \"user\", "
          "\"assistant\"",
          i, absl::CHexEscape(role)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FormatChatML(absl::Span<const ChatMessage> messages,
                                         bool add_generation_prompt) {
  if (absl::Status s = CheckRoles(messages); !s.ok()) return s;
  std::string out;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, kImStart, m.role, "\n", m.content, kImEnd, "\n");
  }
  if (add_generation_prompt) absl::StrAppend(&out, kImStart, "assistant\n");
  return out;
}

absl::StatusOr<std::vector<int32_t>> EncodeChatML(
    const Tokenizer& tokenizer, absl::Span<const ChatMessage> messages,
    bool add_generation_prompt) {
  if (absl::Status s = CheckRoles(messages); !s.ok()) return s;
  const int32_t im_start = tokenizer.TokenId(kImStart);
  const int32_t im_end = tokenizer.TokenId(kImEnd);
  if (im_start < 0 || im_end < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chat template: the vocabulary has no \"%s\" token",
        im_start < 0 ? kImStart : kImEnd));
  }
  std::vector<int32_t> ids;
  const auto append_text = [&](const std::string& text) {
    const std::vector<int32_t> part = tokenizer.Encode(text, false);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  // The raw stretches are exactly those that special-token splitting of
  // the formatted text would produce, so word boundaries match.
  for (const ChatMessage& m : messages) {
    ids.push_back(im_start);
    append_text(absl::StrCat(m.role, "\n", m.content));
    ids.push_back(im_end);
    append_text("\n");
  }
  if (add_generation_prompt) {
    ids.push_back(im_start);
    append_text("assistant\n");
  }
  return ids;
}

}  // namespace sluice
