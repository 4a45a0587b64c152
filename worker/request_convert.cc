#include "worker/request_convert.h"

#include "absl/strings/str_cat.h"
#include "model/chat_template.h"

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
      std::vector<ChatMessage> messages;
      for (const sluice::v1::ChatMessage& m : request.chat().messages()) {
        messages.push_back({m.role(), m.content()});
      }
      absl::StatusOr<std::vector<int32_t>> chat =
          EncodeChatML(tokenizer, messages, /*add_generation_prompt=*/true);
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
