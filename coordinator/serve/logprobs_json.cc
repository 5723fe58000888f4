#include "coordinator/serve/logprobs_json.h"

#include <string>

namespace flotilla::coordinator::serve {
namespace {

using json = nlohmann::json;

json Bytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

json Chat(const TokenChoice& c) {
  return {{"token", c.text}, {"logprob", c.logprob}, {"bytes", Bytes(c.text)}};
}

}  // namespace

json ChatLogprobs(const std::vector<TokenLogprob>& tokens) {
  json content = json::array();
  for (const TokenLogprob& t : tokens) {
    json entry = Chat(t.token);
    entry["top_logprobs"] = json::array();
    for (const TokenChoice& alt : t.top) {
      entry["top_logprobs"].push_back(Chat(alt));
    }
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

json CompletionLogprobs(const std::vector<TokenLogprob>& tokens,
                        size_t* text_offset) {
  json texts = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    texts.push_back(t.token.text);
    logprobs.push_back(t.token.logprob);
    json top = json::object();
    for (const TokenChoice& alt : t.top) top[alt.text] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(*text_offset);
    *text_offset += t.token.text.size();
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace flotilla::coordinator::serve
