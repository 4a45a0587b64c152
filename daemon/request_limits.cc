#include "daemon/request_limits.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/sampling_ranges.h"

namespace sluice::daemon {
namespace {

absl::Status TooLong(const std::string& field, size_t size, size_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", size, " bytes exceed the limit of ", limit));
}

// The worker's wording (base/sampling_ranges.h), after the request's field.
absl::Status OutOfRange(const char* field, double value, const char* range) {
  return SamplingOutOfRange("GenerateRequest.sampling: ", field, value, range);
}

absl::Status CheckSampling(const v1::SamplingParams& s, const RequestLimits& limits) {
  if (s.has_top_k() && s.top_k() > limits.max_top_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("GenerateRequest.sampling.top_k=", s.top_k(), ": too large"));
  }
  if (s.has_repetition_window() && s.repetition_window() > limits.max_repetition_window) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GenerateRequest.sampling.repetition_window=", s.repetition_window(), ": too large"));
  }
  if (s.has_temperature()) {
    if (const char* r = TemperatureOutside(s.temperature())) {
      return OutOfRange("temperature", s.temperature(), r);
    }
  }
  if (s.has_top_p()) {
    if (const char* r = TopPOutside(s.top_p())) return OutOfRange("top_p", s.top_p(), r);
  }
  if (s.has_min_p()) {
    if (const char* r = MinPOutside(s.min_p())) return OutOfRange("min_p", s.min_p(), r);
  }
  if (s.has_repetition_penalty()) {
    if (const char* r = RepetitionPenaltyOutside(s.repetition_penalty())) {
      return OutOfRange("repetition_penalty", s.repetition_penalty(), r);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckModelIdField(const std::string& field, const std::string& model_id,
                               const RequestLimits& limits) {
  if (model_id.size() > limits.max_model_id_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "='", QuoteForMessage(model_id), "': longer than ", limits.max_model_id_bytes,
        " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckChat(const v1::ChatInput& chat, const RequestLimits& limits) {
  if (static_cast<size_t>(chat.messages_size()) > limits.max_chat_messages) {
    return absl::InvalidArgumentError(absl::StrCat("GenerateRequest.chat: ",
                                                   chat.messages_size(),
                                                   " messages exceed the limit of ",
                                                   limits.max_chat_messages));
  }
  size_t total = 0;
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& m = chat.messages(i);
    if (m.role() != "system" && m.role() != "user" && m.role() != "assistant" &&
        m.role() != "tool") {
      // The worker's wording (model/chat_template.cc), the role cut short.
      return absl::InvalidArgumentError(absl::StrCat(
          "GenerateRequest.chat: chat message ", i, ": role \"",
          QuoteForMessage(m.role(), limits.max_role_bytes),
          "\" is not one of \"system\", \"user\", \"assistant\", \"tool\""));
    }
    total += m.content().size() + m.tool_call_id().size();
    for (const v1::ToolCall& c : m.tool_calls()) {
      total += c.id().size() + c.name().size() + c.arguments().size();
    }
  }
  // Tool definitions are prompt text too.
  for (const v1::Tool& t : chat.tools()) {
    total += t.name().size() + t.description().size() + t.parameters().size();
  }
  if (total > limits.max_text_bytes) {
    return TooLong("GenerateRequest.chat: the message contents", total, limits.max_text_bytes);
  }
  return absl::OkStatus();
}

}  // namespace

std::string QuoteForMessage(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string_view head = text.substr(0, std::min(text.size(), max_bytes));
  std::string out = absl::CHexEscape(absl::string_view(head.data(), head.size()));
  if (cut) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

namespace {

// The names our own code looks up, not the file's choice.
bool WellKnownName(absl::string_view s) {
  static constexpr absl::string_view kPrefixes[] = {
      "general.", "tokenizer.", "split.", "blk.", "token_embd.", "output.", "output_norm.",
      "qwen3moe.", "qwen35moe.", "qwen3.", "llama.", "deepseek2."};
  if (s == "GGUF") return true;  // the magic the loader expects
  if (s.size() > 64) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && !absl::ascii_islower(c) && c != '.' && c != '_') return false;
  }
  for (absl::string_view p : kPrefixes) {
    if (absl::StartsWith(s, p)) return true;
  }
  return false;
}

}  // namespace

std::string SaneRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 128) return "";
  for (const char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '-') {
      return "";
    }
  }
  return std::string(id);
}

std::string WithoutFileContent(std::string_view finding, bool numbers) {
  const absl::string_view m(finding.data(), finding.size());
  std::string out;
  size_t i = 0;
  // The file's own path, as the loader names it: the client's request.
  if (const size_t colon = m.find(": "); !m.empty() && m[0] == '/' && colon != m.npos) {
    i = colon + 2;
    out.append(m.data(), i);
  }
  while (i < m.size()) {
    const char c = m[i];
    if (c == '\'' || c == '"') {
      const size_t end = m.find(c, i + 1);
      const absl::string_view inner =
          m.substr(i + 1, end == absl::string_view::npos ? absl::string_view::npos : end - i - 1);
      const bool shown = WellKnownName(inner);
      absl::StrAppend(&out, std::string(1, c), shown ? inner : "(withheld)", std::string(1, c));
      i = end == absl::string_view::npos ? m.size() : end + 1;
    } else if (numbers && absl::ascii_isdigit(c) && (i == 0 || !absl::ascii_isalnum(m[i - 1]))) {
      while (i < m.size() && (absl::ascii_isxdigit(m[i]) || m[i] == 'x')) ++i;
      out.push_back('N');
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

absl::Status CheckGenerateRequest(const v1::GenerateRequest& r, const RequestLimits& limits) {
  if (!r.request_id().empty() && SaneRequestId(r.request_id()).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GenerateRequest.request_id: '", QuoteForMessage(r.request_id(), 32),
        "' must be 1 to 128 characters of [A-Za-z0-9._:-]"));
  }
  if (absl::Status s = CheckModelIdField("GenerateRequest.model_id", r.model_id(), limits);
      !s.ok()) {
    return s;
  }
  switch (r.input_case()) {
    case v1::GenerateRequest::kPrompt:
      if (r.prompt().size() > limits.max_text_bytes) {
        return TooLong("GenerateRequest.prompt", r.prompt().size(), limits.max_text_bytes);
      }
      break;
    case v1::GenerateRequest::kTokenIds:
      if (static_cast<size_t>(r.token_ids().ids_size()) > limits.max_token_ids) {
        return absl::InvalidArgumentError(absl::StrCat(
            "GenerateRequest.token_ids: ", r.token_ids().ids_size(),
            " ids exceed the limit of ", limits.max_token_ids));
      }
      break;
    case v1::GenerateRequest::kChat:
      if (absl::Status s = CheckChat(r.chat(), limits); !s.ok()) return s;
      break;
    case v1::GenerateRequest::INPUT_NOT_SET:
      return absl::InvalidArgumentError(
          "GenerateRequest.input: set one of prompt, token_ids or chat");
  }
  if (static_cast<size_t>(r.stop_size()) > limits.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat("GenerateRequest.stop: ", r.stop_size(),
                                                   " strings exceed the limit of ",
                                                   limits.max_stop_strings));
  }
  for (int i = 0; i < r.stop_size(); ++i) {
    if (r.stop(i).size() > limits.max_stop_bytes) {
      return TooLong(absl::StrCat("GenerateRequest.stop[", i, "]"), r.stop(i).size(),
                     limits.max_stop_bytes);
    }
  }
  return CheckSampling(r.sampling(), limits);
}

absl::Status CheckTokenizeRequest(const v1::TokenizeRequest& r, const RequestLimits& limits) {
  if (absl::Status s = CheckModelIdField("TokenizeRequest.model_id", r.model_id(), limits);
      !s.ok()) {
    return s;
  }
  if (r.text().size() > limits.max_text_bytes) {
    return TooLong("TokenizeRequest.text", r.text().size(), limits.max_text_bytes);
  }
  return absl::OkStatus();
}

}  // namespace sluice::daemon
