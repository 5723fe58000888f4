// The OpenAI shapes of per-token log-probabilities. Chat completions:
//   {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
// Completions (the legacy shape):
//   {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}],
//    "text_offset"}
// A token's text is what it adds to the decoded text (TokenChoice); invalid
// UTF-8 is replaced when the JSON is written, "bytes" keeps the exact
// bytes.
#ifndef FLOTILLA_COORDINATOR_SERVE_LOGPROBS_JSON_H_
#define FLOTILLA_COORDINATOR_SERVE_LOGPROBS_JSON_H_

#include <cstddef>
#include <vector>

#include "coordinator/serve/completion_job.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {

nlohmann::json ChatLogprobs(const std::vector<TokenLogprob>& tokens);

// `text_offset` is where the first token's text starts in the completion
// (the length of the text streamed before it); it advances past each token.
nlohmann::json CompletionLogprobs(const std::vector<TokenLogprob>& tokens,
                                  size_t* text_offset);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_LOGPROBS_JSON_H_
