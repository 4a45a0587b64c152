#include "worker/request_convert.h"

#include <list>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "model/chat_template.h"
#include "model/grammar_json.h"
#include "worker/tool_calls.h"

namespace sluice::worker {

absl::StatusOr<SamplerParams> ToSamplerParams(const sluice::v1::SamplingParams& s) {
  SamplerParams p;
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_k()) {
    if (s.top_k() > (1u << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GenerateRequest.sampling.top_k=", s.top_k(), ": too large"));
    }
    p.top_k = static_cast<int>(s.top_k());
  }
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_repetition_window()) {
    if (s.repetition_window() > (1u << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GenerateRequest.sampling.repetition_window=", s.repetition_window(),
          ": too large"));
    }
    p.repetition_window = static_cast<int>(s.repetition_window());
  }
  if (s.has_seed()) p.seed = s.seed();
  if (absl::Status v = ValidateSamplerParams(p); !v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GenerateRequest.sampling: ", v.message()));
  }
  return p;
}

absl::StatusOr<std::vector<int32_t>> PromptIds(const Tokenizer& tokenizer,
                                               const sluice::v1::GenerateRequest& request) {
  std::vector<int32_t> ids;
  switch (request.input_case()) {
    case sluice::v1::GenerateRequest::kPrompt:
      ids = tokenizer.Encode(request.prompt(), request.parse_special());
      break;
    case sluice::v1::GenerateRequest::kTokenIds:
      ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= tokenizer.n_vocab()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "GenerateRequest.token_ids.ids[", i, "]=", ids[i],
              ": outside the vocabulary [0, ", tokenizer.n_vocab(), ")"));
        }
      }
      break;
    case sluice::v1::GenerateRequest::kChat: {
      absl::StatusOr<std::vector<ChatMessage>> messages = RenderChat(
          request.chat(),
          /*render_tools=*/request.tool_choice().mode() != sluice::v1::ToolChoice::TOOL_CHOICE_NONE);
      if (!messages.ok()) return messages.status();
      absl::StatusOr<std::vector<int32_t>> chat =
          EncodeChatML(tokenizer, *messages, /*add_generation_prompt=*/true);
      if (!chat.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("GenerateRequest.chat: ", chat.status().message()));
      }
      ids = *std::move(chat);
      break;
    }
    case sluice::v1::GenerateRequest::INPUT_NOT_SET:
      return absl::InvalidArgumentError(
          "GenerateRequest.input: set one of prompt, token_ids or chat");
  }
  if (ids.empty()) {
    return absl::InvalidArgumentError("GenerateRequest: the prompt has no tokens");
  }
  return ids;
}

namespace {

// The last few compiled grammars of one tokenizer (the worker has one).
class GrammarCache {
 public:
  static GrammarCache& Get() {
    static GrammarCache* cache = new GrammarCache();
    return *cache;
  }

  absl::StatusOr<std::shared_ptr<const TokenGrammar>> Find(const Tokenizer& tokenizer,
                                                          const std::string& key,
                                                          const std::string& text) {
    absl::MutexLock lock(&mu_);
    if (tokenizer_ != &tokenizer) {
      tokenizer_ = &tokenizer;
      vocab_ = TokenVocab::Create(tokenizer);
      entries_.clear();
    }
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);
        return entries_.front().second;
      }
    }
    absl::StatusOr<std::shared_ptr<const Grammar>> grammar = Grammar::Parse(text);
    if (!grammar.ok()) return grammar.status();
    entries_.emplace_front(key, TokenGrammar::Create(*std::move(grammar), vocab_));
    if (entries_.size() > kEntries) entries_.pop_back();
    return entries_.front().second;
  }

 private:
  static constexpr size_t kEntries = 16;
  absl::Mutex mu_;
  const Tokenizer* tokenizer_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<const TokenVocab> vocab_ ABSL_GUARDED_BY(mu_);
  std::list<std::pair<std::string, std::shared_ptr<const TokenGrammar>>> entries_
      ABSL_GUARDED_BY(mu_);
};

absl::Status FormatError(const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat("GenerateRequest.format: ", status.message()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TokenGrammar>> OutputGrammar(
    const Tokenizer& tokenizer, const sluice::v1::OutputFormat& format) {
  std::string key, text;
  switch (format.kind_case()) {
    case sluice::v1::OutputFormat::KIND_NOT_SET:
      return std::shared_ptr<const TokenGrammar>();
    case sluice::v1::OutputFormat::kGrammar:
      key = absl::StrCat("g:", format.grammar());
      text = format.grammar();
      break;
    case sluice::v1::OutputFormat::kJsonSchema: {
      key = absl::StrCat("s:", format.json_schema());
      absl::StatusOr<std::string> compiled = JsonSchemaToGrammar(format.json_schema());
      if (!compiled.ok()) return FormatError(compiled.status());
      text = *std::move(compiled);
      break;
    }
    case sluice::v1::OutputFormat::kJsonObject:
      key = "json_object";
      text = JsonGrammar(/*object_only=*/true);
      break;
  }
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> g =
      GrammarCache::Get().Find(tokenizer, key, text);
  if (!g.ok()) return FormatError(g.status());
  return g;
}

absl::StatusOr<GenerateParams> ToGenerateParams(const Tokenizer& tokenizer,
                                                int context_length,
                                                const sluice::v1::GenerateRequest& request) {
  GenerateParams params;
  absl::StatusOr<std::vector<int32_t>> ids = PromptIds(tokenizer, request);
  if (!ids.ok()) return ids.status();
  params.prompt = *std::move(ids);
  if (static_cast<int64_t>(params.prompt.size()) >= context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GenerateRequest: the prompt has ", params.prompt.size(),
        " tokens; the context holds ", context_length));
  }
  absl::StatusOr<SamplerParams> sampler = ToSamplerParams(request.sampling());
  if (!sampler.ok()) return sampler.status();
  params.sampler = *sampler;
  sluice::v1::OutputFormat format = request.format();
  if (request.has_chat()) {
    absl::StatusOr<std::string> calls = ToolCallGrammar(request.chat(), request.tool_choice());
    if (!calls.ok()) return calls.status();
    if (!calls->empty()) {
      if (request.has_format()) {
        return absl::InvalidArgumentError(
            "GenerateRequest: format and a forced tool_choice exclude each other");
      }
      format.set_grammar(*calls);
    }
  }
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> grammar = OutputGrammar(tokenizer, format);
  if (!grammar.ok()) return grammar.status();
  params.sampler.grammar = *std::move(grammar);
  const int room = context_length - static_cast<int>(params.prompt.size());
  params.max_tokens = request.max_tokens() == 0
                          ? room
                          : static_cast<int>(std::min<uint32_t>(request.max_tokens(), room));
  params.stop.assign(request.stop().begin(), request.stop().end());
  params.stop_at_eos = !request.ignore_eos();
  return params;
}

sluice::v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return sluice::v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return sluice::v1::FINISH_REASON_STOP;
    case FinishReason::kEos: return sluice::v1::FINISH_REASON_EOS;
    case FinishReason::kCancelled: return sluice::v1::FINISH_REASON_UNSPECIFIED;
  }
  return sluice::v1::FINISH_REASON_UNSPECIFIED;
}

sluice::v1::GenerateDone ToGenerateDone(const GenerateResult& r) {
  sluice::v1::GenerateDone done;
  done.set_finish_reason(ToProtoFinishReason(r.finish_reason));
  done.mutable_usage()->set_prompt_tokens(r.prompt_tokens);
  done.mutable_usage()->set_completion_tokens(r.generated_tokens);
  sluice::v1::Timings* t = done.mutable_timings();
  const double prompt_ms =
      r.prefill_tok_per_s > 0 ? 1000.0 * r.prompt_tokens / r.prefill_tok_per_s : 0;
  const double decode_ms = r.decode_tok_per_s > 0 && r.generated_tokens > 1
                               ? 1000.0 * (r.generated_tokens - 1) / r.decode_tok_per_s
                               : 0;
  t->set_prompt_ms(prompt_ms);
  t->set_time_to_first_token_ms(r.ttft_s * 1000.0);
  t->set_decode_ms(decode_ms);
  t->set_prompt_tokens_per_second(r.prefill_tok_per_s);
  t->set_decode_tokens_per_second(r.decode_tok_per_s);
  return done;
}

}  // namespace sluice::worker
