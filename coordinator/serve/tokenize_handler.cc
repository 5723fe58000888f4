// vLLM's POST /tokenize and /detokenize: the ids a completion would feed
// for a prompt (or a chat rendered with the server's template), and the
// text of ids.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/http_internal.h"
#include "coordinator/serve/http_server.h"
#include "nlohmann/json.hpp"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace {

using internal::Dump;
using internal::Error;
using json = nlohmann::json;

// The body as a JSON object whose keys are all in `known`, and whose
// "model" (if any) is a string, and the one served when names are strict;
// else answers 400/404 and null.
std::optional<json> Body(const http::HttpRequest& req,
                         const std::vector<std::string>& known,
                         const std::string& model_name, bool strict_model_name,
                         http::HttpResponse* res) {
  auto parsed = model::internal::ParseJson(req.body, "the request body");
  if (!parsed.ok() || !parsed->is_object()) {
    Error(res, 400,
          parsed.ok() ? "the request body must be a JSON object"
                      : std::string(parsed.status().message()));
    return std::nullopt;
  }
  for (const auto& [key, value] : parsed->items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      Error(res, 400, absl::StrCat("unknown field '", key, "'"));
      return std::nullopt;
    }
  }
  const auto m = parsed->find("model");
  if (m != parsed->end() && !m->is_null() &&
      (!m->is_string() || (strict_model_name && *m != model_name))) {
    Error(res, 404,
          absl::StrCat("model ", m->dump(),
                       " is not served here (this server serves '", model_name,
                       "')"));
    return std::nullopt;
  }
  return *std::move(parsed);
}

}  // namespace

void HttpServer::Tokenize(const http::HttpRequest& req,
                          http::HttpResponse* res) const {
  if (!Admit(req, res)) return;
  const auto body = Body(
      req, {"model", "prompt", "messages", "tools", "chat_template_kwargs"},
      options_.model_name, options_.strict_model_name, res);
  if (!body) return;
  if (tokenizer_ == nullptr) {
    return Error(res, 400, "this model has no tokenizer");
  }
  const bool chat = body->contains("messages");
  if (chat == body->contains("prompt")) {
    return Error(res, 400, "give either prompt or messages");
  }
  std::string text;
  if (chat) {
    // Checked and rendered as a chat request's messages are (its other
    // fields are all chat request fields).
    auto parsed = ParseCompletionRequest(req.body, /*chat=*/true, options_.limits);
    if (!parsed.ok()) {
      return Error(res, 400, std::string(parsed.status().message()));
    }
    absl::StatusOr<std::string> rendered =
        chat_format().Render(*parsed, options_.limits.max_prompt_bytes);
    if (!rendered.ok()) {
      return Error(res, 400, std::string(rendered.status().message()));
    }
    text = *std::move(rendered);
  } else {
    const json& p = (*body)["prompt"];
    if (!p.is_string()) return Error(res, 400, "prompt must be a string");
    text = p.get<std::string>();
    if (text.size() > options_.limits.max_prompt_bytes) {
      return Error(
          res, 400,
          absl::StrCat("prompt is ", text.size(), " bytes; the limit is ",
                       options_.limits.max_prompt_bytes));
    }
  }
  const std::vector<int32_t> ids = tokenizer_->Encode(text);
  res->Set(200, "application/json",
           Dump({{"count", ids.size()},
                 {"max_model_len", options_.limits.max_context},
                 {"tokens", ids}}));
}

void HttpServer::Detokenize(const http::HttpRequest& req,
                            http::HttpResponse* res) const {
  if (!Admit(req, res)) return;
  const auto body = Body(req, {"model", "tokens"}, options_.model_name,
                         options_.strict_model_name, res);
  if (!body) return;
  if (tokenizer_ == nullptr) {
    return Error(res, 400, "this model has no tokenizer");
  }
  const auto t = body->find("tokens");
  if (t == body->end() || !t->is_array()) {
    return Error(res, 400, "tokens must be an array of token ids");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < t->size(); ++i) {
    const json& v = (*t)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= model_->vocab_size()) {
      return Error(res, 400,
                   absl::StrCat("tokens[", i,
                                "] is not a token id of this "
                                "model (0..",
                                model_->vocab_size() - 1, ")"));
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  auto text = tokenizer_->Decode(ids);
  if (!text.ok()) return Error(res, 400, std::string(text.status().message()));
  res->Set(200, "application/json", Dump({{"prompt", *text}}));
}

}  // namespace flotilla::coordinator::serve
