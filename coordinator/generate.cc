#include "coordinator/generate.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "coordinator/speculate.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
using base::SecondsSince;

absl::Status CheckGenerateRequest(const std::vector<int32_t>& prompt,
                                  const GenerateOptions& options) {
  if (prompt.empty()) {
    return absl::InvalidArgumentError("the prompt has no tokens");
  }
  if (options.max_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be >= 0, got ", options.max_tokens));
  }
  if ((!options.speculate.empty() || options.drafter != nullptr) &&
      (options.draft_tokens < 1 || options.draft_tokens > 64)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "draft_tokens must be in [1, 64], got ", options.draft_tokens));
  }
  return ValidateSamplerOptions(options.sampler);
}

bool AcceptToken(const float* logits, int vocab, const GenerateOptions& options,
                 Sampler* sampler, const TokenCallback& on_token,
                 GenerateResult* result) {
  int32_t id;
  bool complete = false;
  if (options.constraint != nullptr) {
    thread_local std::vector<float> masked;
    masked.assign(logits, logits + vocab);
    options.constraint->Mask(
        masked.data(), vocab,
        options.max_tokens - static_cast<int>(result->generated_ids.size()));
    id = sampler->Sample(masked.data(), vocab);
    complete = options.constraint->Accept(id);
  } else {
    id = sampler->Sample(logits, vocab);
  }
  sampler->Accept(id);
  result->generated_ids.push_back(id);
  if (options.keep_logits) {
    result->logits.insert(result->logits.end(), logits, logits + vocab);
  }
  const bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(),
                              id) != options.stop_ids.end();
  if (on_token && !on_token(id)) return true;
  if (stop || complete) {
    result->finish_reason = "stop";
    return true;
  }
  return static_cast<int>(result->generated_ids.size()) >= options.max_tokens;
}

absl::StatusOr<GenerateResult> Generate(LanguageModel& model,
                                        const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options,
                                        const TokenCallback& on_token) {
  FLOTILLA_RETURN_IF_ERROR(CheckGenerateRequest(prompt, options));
  const int vocab = model.vocab_size();
  GenerateResult result;
  result.finish_reason = "length";
  Sampler sampler(options.sampler, prompt);
  std::unique_ptr<ModelSequence> state = model.StartSequence();
  std::vector<float> logits;

  auto start = std::chrono::steady_clock::now();
  const size_t chunk = options.prefill_chunk > 0
                           ? static_cast<size_t>(options.prefill_chunk)
                           : prompt.size();
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    const std::vector<int32_t> part(prompt.begin() + begin,
                                    prompt.begin() + end);
    FLOTILLA_RETURN_IF_ERROR(base::WithContext(
        model.Forward(state.get(), part, false, &logits),
        absl::StrCat("prefill of prompt tokens ", begin, "..", end - 1)));
  }
  result.prefill_seconds = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  if (!options.speculate.empty() || options.drafter != nullptr) {
    std::shared_ptr<Drafter> drafter = options.drafter;
    if (drafter == nullptr) {
      FLOTILLA_ASSIGN_OR_RETURN(
          drafter, MakeDrafter(options.speculate, options.speculate_pay_check));
    }
    FLOTILLA_RETURN_IF_ERROR(DecodeSpeculatively(model, prompt, options,
                                                 *drafter, logits, &sampler,
                                                 on_token, &state, &result));
    result.decode_seconds = SecondsSince(start);
    result.state_bytes = state->bytes();
    return result;
  }
  for (int step = 0; step < options.max_tokens; ++step) {
    if (step > 0) {
      const auto step_start = std::chrono::steady_clock::now();
      FLOTILLA_RETURN_IF_ERROR(base::WithContext(
          model.Forward(state.get(), {result.generated_ids.back()}, false,
                        &logits),
          absl::StrCat("decode step ", step)));
      result.step_seconds.push_back(SecondsSince(step_start));
    }
    if (AcceptToken(logits.data(), vocab, options, &sampler, on_token,
                    &result)) {
      break;
    }
  }
  result.decode_seconds = SecondsSince(start);
  result.state_bytes = state->bytes();
  return result;
}

absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int64_t id = 0;
    if (!absl::SimpleAtoi(item, &id) || id < 0 || id > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad token id '", item, "' in '", text,
                       "' (expected non-negative integers separated by "
                       "commas)"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace flotilla::coordinator
