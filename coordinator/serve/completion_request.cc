#include "coordinator/serve/completion_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/serve/chat_request.h"
#include "coordinator/serve/request_errors.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"
#include "shared/tokenizer/utf8.h"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;
using internal::Text;

using internal::Bad;

absl::StatusOr<int64_t> Integer(const Json& v, const std::string& field,
                                int64_t lo, int64_t hi) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return Bad(absl::StrCat(field, " must be an integer in ", lo, "..", hi));
  }
  return v.get<int64_t>();
}

absl::StatusOr<double> Number(const Json& v, const std::string& field) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    return Bad(absl::StrCat(field, " must be a finite number"));
  }
  return v.get<double>();
}

absl::Status ParsePrompt(const Json& p, const RequestLimits& limits,
                         CompletionRequest* r) {
  if (p.is_string()) {
    FLOTILLA_ASSIGN_OR_RETURN(r->prompt, Text(p, "prompt", limits));
    return absl::OkStatus();
  }
  if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    FLOTILLA_ASSIGN_OR_RETURN(r->prompt, Text(p[0], "prompt[0]", limits));
    return absl::OkStatus();
  }
  if (p.is_array() && !p.empty() && p[0].is_number()) {
    for (size_t i = 0; i < p.size(); ++i) {
      FLOTILLA_ASSIGN_OR_RETURN(
          const int64_t id,
          Integer(p[i], absl::StrCat("prompt[", i, "]"), 0, INT32_MAX));
      r->prompt_ids.push_back(static_cast<int32_t>(id));
    }
    return absl::OkStatus();
  }
  if (p.is_array() && p.size() > 1) {
    return Bad(
        "prompt: several prompts in one request are not supported (n "
        "= 1); send one request per prompt");
  }
  return Bad(
      "prompt must be a string, an array of one string, or an array "
      "of token ids");
}

absl::Status ParseStop(const Json& s, const RequestLimits& limits,
                       CompletionRequest* r) {
  if (s.is_null()) return absl::OkStatus();
  const Json list = s.is_array() ? s : Json::array({s});
  if (list.size() > 16) return Bad("stop: at most 16 entries");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat("stop[", i, "]");
    if (!list[i].is_string()) {
      // Token ids stop a request through the gRPC API's stop ids.
      return Bad(s.is_array() ? at + " must be a string"
                              : "stop must be a string or a list of strings");
    }
    FLOTILLA_ASSIGN_OR_RETURN(std::string text, Text(list[i], at, limits));
    if (text.empty()) return Bad(at + " is empty");
    r->stop.push_back(std::move(text));
  }
  return absl::OkStatus();
}

// {"<token id>": bias, ...}, as OpenAI sends it (ids are JSON keys).
absl::Status ParseLogitBias(const Json& v, SamplerOptions* sampler) {
  if (!v.is_object()) return Bad("logit_bias must be an object");
  if (v.size() > 1024) return Bad("logit_bias: at most 1024 entries");
  for (const auto& [key, bias] : v.items()) {
    int32_t id = 0;
    if (key.empty() || key.size() > 9 ||
        key.find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(key, &id)) {
      return Bad(absl::StrCat("logit_bias: key '", key, "' is not a token id"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        const double b,
        Number(bias, absl::StrCat("logit_bias[\"", key, "\"]")));
    sampler->logit_bias.emplace_back(id, static_cast<float>(b));
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

absl::StatusOr<std::string> Text(const nlohmann::ordered_json& v, const std::string& field,
                                 const RequestLimits& limits) {
  if (!v.is_string()) return Bad(absl::StrCat(field, " must be a string"));
  std::string s = v.get<std::string>();
  if (s.size() > limits.max_prompt_bytes) {
    return Bad(absl::StrCat(field, " is ", s.size(), " bytes; the limit is ",
                            limits.max_prompt_bytes));
  }
  if (!tokenizer::IsValidUtf8(s))
    return Bad(absl::StrCat(field, " is not valid UTF-8"));
  return s;
}

}  // namespace internal

absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body, bool chat, const RequestLimits& limits) {
  if (!tokenizer::IsValidUtf8(body)) {
    return Bad("the request body is not valid UTF-8 (JSON text must be)");
  }
  // Through the guarded parser: a body nested thousands deep or naming a
  // field twice is refused before a DOM is built.
  absl::StatusOr<Json> parsed =
      model::internal::ParseOrderedJson(body, "the request body");
  if (!parsed.ok()) {
    const std::string why(parsed.status().message());
    return Bad(
        absl::StrContains(why, "refused JSON")
            ? why
            : absl::StrCat("the request body is not valid JSON (", why, ")"));
  }
  return ParseCompletionRequestJson(*parsed, chat, limits);
}

absl::StatusOr<CompletionRequest> ParseCompletionRequestJson(
    const nlohmann::ordered_json& j, bool chat, const RequestLimits& limits) {
  if (!j.is_object()) return Bad("the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  r.max_tokens = limits.default_max_tokens;
  r.sampler = limits.default_sampler;
  bool chat_logprobs = false;
  int chat_top = -1;
  bool seeded = false;
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;  // OpenAI clients send explicit nulls
    if (key == "model") {
      if (!v.is_string()) return Bad("model must be a string");
      r.model = v.get<std::string>();
    } else if (key == "prompt" && !chat) {
      FLOTILLA_RETURN_IF_ERROR(ParsePrompt(v, limits, &r));
    } else if (key == "messages" && chat) {
      FLOTILLA_RETURN_IF_ERROR(internal::ParseMessages(v, limits, &r));
    } else if (key == "max_tokens" || key == "max_completion_tokens" ||
               key == "n_predict") {
      // A cap, not a demand: more than --max-completion-tokens (or the
      // context left, CapMaxTokens) stops there with finish_reason
      // "length", as llama-server does. n_predict: llama-server's name.
      FLOTILLA_ASSIGN_OR_RETURN(
          const int64_t n,
          Integer(v, key, 1, std::numeric_limits<int32_t>::max()));
      r.max_tokens = static_cast<int>(std::min<int64_t>(n, limits.max_tokens));
      r.max_tokens_given = true;
    } else if (key == "temperature") {
      FLOTILLA_ASSIGN_OR_RETURN(const double t, Number(v, key));
      r.sampler.temperature = static_cast<float>(t);
    } else if (key == "top_p") {
      FLOTILLA_ASSIGN_OR_RETURN(const double p, Number(v, key));
      r.sampler.top_p = static_cast<float>(p);
    } else if (key == "top_k") {
      FLOTILLA_ASSIGN_OR_RETURN(const int64_t k, Integer(v, key, 0, 1 << 20));
      r.sampler.top_k = static_cast<int>(k);
    } else if (key == "seed") {
      FLOTILLA_ASSIGN_OR_RETURN(
          const int64_t s, Integer(v, key, std::numeric_limits<int64_t>::min(),
                                   std::numeric_limits<int64_t>::max()));
      r.sampler.seed = static_cast<uint64_t>(s);
      seeded = true;
    } else if (key == "stop") {
      FLOTILLA_RETURN_IF_ERROR(ParseStop(v, limits, &r));
    } else if (key == "stream") {
      if (!v.is_boolean()) return Bad("stream must be true or false");
      r.stream = v.get<bool>();
    } else if (key == "stream_options") {
      if (!v.is_object()) return Bad("stream_options must be an object");
      const auto it = v.find("include_usage");
      if (it != v.end() && !it->is_null()) {
        if (!it->is_boolean()) {
          return Bad("stream_options.include_usage must be true or false");
        }
        r.include_usage = it->get<bool>();
      }
    } else if (key == "n") {
      FLOTILLA_RETURN_IF_ERROR(Integer(v, key, 1, 1).status());
    } else if (key == "return_tokens_as_token_ids") {
      if (!v.is_boolean())
        return Bad(absl::StrCat(key, " must be true or false"));
      r.tokens_as_ids = v.get<bool>();
    } else if (key == "logprobs" && chat) {
      if (!v.is_boolean()) return Bad("logprobs must be true or false");
      chat_logprobs = v.get<bool>();
    } else if (key == "top_logprobs" && chat) {
      FLOTILLA_ASSIGN_OR_RETURN(const int64_t n,
                                Integer(v, key, 0, kMaxTopLogprobs));
      chat_top = static_cast<int>(n);
    } else if (key == "logprobs" && !chat) {
      if (v.is_boolean()) {
        return Bad(
            "logprobs on /v1/completions is a number of alternatives "
            "0..20 (true/false is the chat form)");
      }
      FLOTILLA_ASSIGN_OR_RETURN(const int64_t n,
                                Integer(v, key, 0, kMaxTopLogprobs));
      r.top_logprobs = static_cast<int>(n);
    } else if (key == "min_p") {
      FLOTILLA_ASSIGN_OR_RETURN(const double p, Number(v, key));
      r.sampler.min_p = static_cast<float>(p);
    } else if (key == "presence_penalty") {
      FLOTILLA_ASSIGN_OR_RETURN(const double p, Number(v, key));
      r.sampler.presence_penalty = static_cast<float>(p);
    } else if (key == "frequency_penalty") {
      FLOTILLA_ASSIGN_OR_RETURN(const double p, Number(v, key));
      r.sampler.frequency_penalty = static_cast<float>(p);
    } else if (key == "repetition_penalty" || key == "repeat_penalty") {
      FLOTILLA_ASSIGN_OR_RETURN(const double p, Number(v, key));
      r.sampler.repetition_penalty = static_cast<float>(p);
    } else if (key == "logit_bias") {
      FLOTILLA_RETURN_IF_ERROR(ParseLogitBias(v, &r.sampler));
    } else if (key == "ignore_eos") {
      if (!v.is_boolean()) return Bad("ignore_eos must be true or false");
      r.ignore_eos = v.get<bool>();
    } else if (key == "response_format") {
      FLOTILLA_RETURN_IF_ERROR(internal::ParseResponseFormat(v, &r));
    } else if (key == "tools" && chat) {
      FLOTILLA_RETURN_IF_ERROR(internal::ParseTools(v, &r));
    } else if (key == "tool_choice" && chat) {
      FLOTILLA_RETURN_IF_ERROR(internal::ParseToolChoice(v, &r));
    } else if (key == "documents" && chat) {
      if (!v.is_array() || v.size() > 256) {
        return Bad("documents must be an array of at most 256 objects");
      }
      for (const Json& d : v) {
        if (!d.is_object()) return Bad("documents must hold objects");
      }
      r.documents = v;
    } else if (key == "chat_template_kwargs" && chat) {
      FLOTILLA_RETURN_IF_ERROR(internal::ParseTemplateKwargs(v, &r));
    } else if (key == "top_logprobs" || key == "echo" || key == "best_of" ||
               key == "suffix") {
      if (!(v.is_boolean() && !v.get<bool>())) {
        return Bad(absl::StrCat(key, " is not supported yet"));
      }
    } else if (key == "parallel_tool_calls") {
      if (!v.is_boolean())
        return Bad("parallel_tool_calls must be true or false");
      r.parallel_tool_calls = v.get<bool>();
    } else if (key == "reasoning_effort" && chat) {
      // Templates that know it (gpt-oss's) read it as a variable.
      if (!v.is_string()) return Bad("reasoning_effort must be a string");
      if (!r.template_kwargs.contains("reasoning_effort")) {
        r.template_kwargs["reasoning_effort"] = v;
      }
    } else if (key == "min_tokens") {
      FLOTILLA_ASSIGN_OR_RETURN(const int64_t n, Integer(v, key, 0, 1 << 30));
      if (n > 0) {
        return Bad(
            "min_tokens above 0 is not supported (it would hold back "
            "end-of-text and stop strings)");
      }
    } else if (key == "user" || key == "metadata" || key == "store" ||
               key == "service_tier" || key == "prompt_cache_key" ||
               key == "safety_identifier" || key == "verbosity" ||
               key == "cache_prompt" || key == "id_slot" ||
               key == "prompt_cache_retention" || key == "client_metadata" ||
               key == "user_id") {
      // Bookkeeping and client hints that change nothing the model
      // generates (the prefix cache is automatic: cache_prompt and
      // prompt_cache_key need nothing more).
    } else if (!chat && (key == "tools" || key == "tool_choice" ||
                         key == "chat_template_kwargs" || key == "documents")) {
      return Bad(absl::StrCat(key, " belongs to /v1/chat/completions"));
    } else if (chat ? key == "prompt" : key == "messages") {
      return Bad(
          absl::StrCat(key, " belongs to ",
                       chat ? "/v1/completions" : "/v1/chat/completions"));
    } else {
      return Bad(absl::StrCat("unknown field '", key, "'"));
    }
  }
  // No seed (or an explicit null) is a fresh random stream per request, as
  // OpenAI, vLLM and llama-server do; a given seed repeats its text.
  if (!seeded) {
    std::random_device random;
    r.sampler.seed = (static_cast<uint64_t>(random()) << 32) | random();
  }
  if (chat_top >= 0 && !chat_logprobs) {
    return Bad("top_logprobs needs logprobs: true");
  }
  if (chat_logprobs) r.top_logprobs = std::max(0, chat_top);
  if (!chat && !r.prompt.has_value() && r.prompt_ids.empty()) {
    return Bad("prompt is required");
  }
  if (chat && r.messages.empty()) return Bad("messages is required");
  FLOTILLA_RETURN_IF_ERROR(internal::ResolveOutputConstraint(&r));
  if (absl::Status s = ValidateSamplerOptions(r.sampler); !s.ok()) {
    return Bad(std::string(s.message()));
  }
  return r;
}

}  // namespace flotilla::coordinator::serve
