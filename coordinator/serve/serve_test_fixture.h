// The serving tests' fixture: the embedded stories model opened once per
// test (in memory), a GenerationQueue and an HttpServer on a free loopback
// port, and a cpp-httplib client.
#ifndef FLOTILLA_COORDINATOR_SERVE_SERVE_TEST_FIXTURE_H_
#define FLOTILLA_COORDINATOR_SERVE_SERVE_TEST_FIXTURE_H_

#include <httplib.h>

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/http_server.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/testing/fixture.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

using json = nlohmann::json;

// The JSON payloads of a server-sent event stream, in order; *done when it
// ended with "data: [DONE]".
inline std::vector<json> SseEvents(const std::string& body, bool* done) {
  std::vector<json> events;
  *done = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end + 2;
    if (data == "[DONE]") {
      *done = true;
      break;
    }
    events.push_back(json::parse(data, nullptr, false));
  }
  return events;
}

// The id in a logprobs token named "token_id:N".
inline int32_t TokenIdOf(const std::string& token) {
  return std::stoi(token.substr(token.find(':') + 1));
}

inline std::string ModelDir() { return testutil::ModelPath("stories260k-moe"); }

// The stories model opened in memory (1G budget).
inline absl::StatusOr<std::unique_ptr<Engine>> OpenStories() {
  EngineOptions eo;
  eo.model_dir = ModelDir();
  eo.mem = "1G";
  return OpenEngine(eo);
}

class ServeTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& api_key = "", size_t max_queue = 64,
                   size_t max_batch = 8, uint64_t prefix_cache_bytes = 0) {
    auto engine = OpenStories();
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    auto tok = tokenizer::Tokenizer::LoadDir(ModelDir());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = *std::move(tok);
    ServeOptions so;
    so.port = 0;
    so.model_name = "stories260k-moe";
    so.api_key = api_key;
    so.limits.max_tokens = 512;
    so.limits.max_prompt_tokens = max_prompt_tokens_;
    so.limits.max_context = engine_->model->max_positions();  // 512
    so.max_queue = max_queue;
    so.limits.request_timeout = request_timeout_;
    so.limits.timeout_ends_as_length = timeout_ends_as_length_;
    so.missing_experts = missing_experts_;
    so.strict_model_name = strict_model_name_;
    QueueOptions qo;
    qo.max_queue = max_queue;
    qo.max_batch = max_batch;
    qo.prefix_cache_bytes = prefix_cache_bytes;
    qo.prefill_chunk = prefill_chunk_;
    qo.prefix_store = prefix_store_;
    queue_ = std::make_unique<GenerationQueue>(engine_->model.get(), qo);
    server_ = std::make_unique<HttpServer>(engine_->model.get(),
                                           tokenizer_.get(), queue_.get(), so);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    server_.reset();
    queue_.reset();  // drains, then the engine goes
  }
  // POST; the status and the parsed body.
  std::pair<int, json> Post(const std::string& path, const std::string& body,
                            const httplib::Headers& headers = {}) {
    auto r = client_->Post(path, headers, body, "application/json");
    if (!r) return {-1, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // One greedy chat turn of 12 tokens on `route` (/v1/chat/completions or
  // Anthropic's /v1/messages): the reply, and its text in *text.
  json ChatTurn(const std::string& route, const json& messages,
                std::string* text) {
    const bool anthropic = route == "/v1/messages";
    json body = {
        {"messages", messages}, {"max_tokens", 12}, {"temperature", 0}};
    if (anthropic) body["model"] = "m";
    auto [status, reply] = Post(route, body.dump());
    EXPECT_EQ(status, 200) << reply.dump();
    if (status != 200) return json::object();
    *text = anthropic
                ? reply["content"][0]["text"].get<std::string>()
                : reply["choices"][0]["message"]["content"].get<std::string>();
    return reply;
  }
  // A chat reply's prompt tokens and how many of them the prefix cache
  // served, from its usage in the route's shape (Anthropic's input_tokens
  // leave out the cached ones; OpenAI's prompt_tokens count them).
  static std::pair<size_t, size_t> PromptAndCached(const json& reply,
                                                   bool anthropic) {
    const json& usage = reply["usage"];
    if (anthropic) {
      const size_t cached = usage["cache_read_input_tokens"].get<size_t>();
      return {usage["input_tokens"].get<size_t>() + cached, cached};
    }
    return {usage["prompt_tokens"].get<size_t>(),
            usage["prompt_tokens_details"]["cached_tokens"].get<size_t>()};
  }
  // The reference prompt, and a second turn: it, then 30 of its reference
  // tokens (the first reply as a client sends it back).
  struct Turns {
    std::vector<int32_t> first, second;
  };
  static Turns ReferenceTurns() {
    std::ifstream in(ModelDir() + "/reference.json");
    const json ref = json::parse(in);
    Turns t;
    t.first = ref["cases"][0]["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> gen = ref["cases"][0]["generated_ids"];
    t.second = t.first;
    t.second.insert(t.second.end(), gen.begin(), gen.begin() + 30);
    return t;
  }
  static std::string IdsRequest(const std::vector<int32_t>& ids, int n) {
    return json{{"prompt", ids}, {"max_tokens", n}}.dump();
  }
  // The text `body` (a completion) gets from a server without a prefix
  // cache, started and stopped for it.
  std::string TextWithoutCache(const std::string& body) {
    StartServer();
    auto [status, reply] = Post("/v1/completions", body);
    EXPECT_EQ(status, 200) << reply.dump();
    TearDown();
    return reply["choices"][0]["text"];
  }

  // The reference continuation of "Once upon a time", as text.
  std::string ReferenceText(int tokens) {
    std::ifstream in(ModelDir() + "/reference.json");
    const json ref = json::parse(in);
    const json& c = ref["cases"][0];
    std::vector<int32_t> prompt = c["prompt_ids"];
    std::vector<int32_t> all = prompt;
    for (int i = 0; i < tokens; ++i) all.push_back(c["generated_ids"][i]);
    return tokenizer_->Decode(all)->substr(tokenizer_->Decode(prompt)->size());
  }

  size_t prefill_chunk_ = 256;
  int max_prompt_tokens_ = 64;
  bool strict_model_name_ = false;
  std::shared_ptr<PrefixStore> prefix_store_;  // QueueOptions' disk cache
  absl::Duration request_timeout_ = absl::InfiniteDuration();
  bool timeout_ends_as_length_ = true;
  std::function<std::string()> missing_experts_;  // ServeOptions' hook
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<GenerationQueue> queue_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_SERVE_TEST_FIXTURE_H_
