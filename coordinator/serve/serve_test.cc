// The HTTP API over the embedded stories model, in process on a free
// loopback port, driven by cpp-httplib's client: completions and chat
// (plain template), streaming, stop strings, limits and error bodies.
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/chat_template.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/grpc_generate.h"
#include "coordinator/serve/http_server.h"
#include "coordinator/serve/prefix_cache.h"
#include "coordinator/serve/serve_test_fixture.h"
#include "coordinator/serve/stop_text.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/testing/fixture.h"
#include "shared/tokenizer/tokenizer.h"
#include "shared/tokenizer/utf8.h"
#include "shared/transport/transport.h"

namespace flotilla::coordinator::serve {
namespace {

TEST_F(ServeTest, HealthAndModels) {
  StartServer();
  auto h = client_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = client_->Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "stories260k-moe");
  auto nope = client_->Get("/v1/nothing");
  ASSERT_TRUE(nope);
  EXPECT_EQ(nope->status, 404);
}

TEST_F(ServeTest, CompletionIsTheGreedyReference) {
  StartServer();
  auto [status, body] =
      Post("/v1/completions",
           R"({"model": "stories260k-moe", "prompt": "Once upon a time",
                                 "max_tokens": 40, "temperature": 0})");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], ReferenceText(40));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["usage"]["completion_tokens"], 40);
  EXPECT_EQ(body["usage"]["total_tokens"], 45);
  // Token ids work as a prompt too.
  auto [s2, b2] =
      Post("/v1/completions",
           R"({"prompt": [1, 403, 407, 261, 378], "max_tokens": 40})");
  ASSERT_EQ(s2, 200) << b2.dump();
  EXPECT_EQ(b2["choices"][0]["text"], body["choices"][0]["text"]);
}

TEST_F(ServeTest, ChatWithThePlainTemplate) {
  StartServer();
  auto [status, body] =
      Post("/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": "Once upon a time"}],
               "max_completion_tokens": 30})");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], ReferenceText(30));
}

TEST_F(ServeTest, StreamedChatEqualsTheWholeReply) {
  StartServer();
  std::string events;
  httplib::Headers headers;
  auto r = client_->Post(
      "/v1/chat/completions", headers,
      R"({"messages": [{"role": "user", "content": "Once upon a time"}],
          "max_tokens": 30, "stream": true,
          "stream_options": {"include_usage": true}})",
      "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"),
            std::string::npos);
  std::string content, finish;
  json usage;
  bool done = false;
  size_t pos = 0;
  const std::string& b = r->body;
  while ((pos = b.find("data: ", pos)) != std::string::npos) {
    const size_t end = b.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    const std::string data = b.substr(pos + 6, end - pos - 6);
    pos = end + 2;
    if (data == "[DONE]") {
      done = true;
      break;
    }
    const json chunk = json::parse(data);
    ASSERT_EQ(chunk["object"], "chat.completion.chunk");
    if (chunk.contains("usage")) usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content"))
      content += choice["delta"]["content"];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(content, ReferenceText(30));
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 30);
}

// The content of a streamed chat reply (SSE body) and its token ids (from
// logprobs with return_tokens_as_token_ids).
std::string StreamedContent(const std::string& body, bool* done,
                            std::vector<int32_t>* ids) {
  std::string content;
  for (const json& chunk : SseEvents(body, done)) {
    if (!chunk.is_object() || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content"))
      content += choice["delta"]["content"].get<std::string>();
    if (!choice.contains("logprobs") || !choice["logprobs"].is_object()) {
      continue;
    }
    for (const json& t : choice["logprobs"]["content"]) {
      ids->push_back(TokenIdOf(t["token"]));
    }
  }
  return content;
}

// 16 clients at once, each with its own prompt and a streamed greedy
// reply: every reply's ids and text are what `Generate` gives that prompt
// alone.
TEST_F(ServeTest, SixteenConcurrentStreamsEachAsAlone) {
  StartServer();
  const std::vector<std::string> starts = {
      "Once upon a time", "The little dog",     "Lily and Ben went to the park",
      "One day",          "Tom had a red ball", "The sun was hot",
      "A big cat",        "Sue liked to sing"};
  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(starts[i % starts.size()] + (i < 8 ? "" : " and"));
  }
  constexpr int kTokens = 24;
  std::vector<std::vector<int32_t>> alone_ids;
  std::vector<std::string> alone_text;
  for (const std::string& p : prompts) {
    const std::vector<int32_t> prompt = tokenizer_->Encode(
        RenderChat(ChatTemplate::kPlain, {ChatMessage{"user", p}}));
    GenerateOptions g;
    g.max_tokens = kTokens;
    g.stop_ids = tokenizer_->StopIds();
    auto r = Generate(*engine_->model, prompt, g, nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<int32_t> all = prompt;
    std::vector<int32_t> shown = r->generated_ids;
    // A stop id ends the reply without being part of its text.
    if (r->finish_reason == "stop") shown.pop_back();
    all.insert(all.end(), shown.begin(), shown.end());
    alone_ids.push_back(r->generated_ids);
    alone_text.push_back(
        tokenizer_->Decode(all)->substr(tokenizer_->Decode(prompt)->size()));
  }
  std::vector<std::string> streamed(prompts.size());
  std::vector<std::vector<int32_t>> streamed_ids(prompts.size());
  std::vector<int> done(prompts.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_read_timeout(120, 0);
      const json body = {
          {"messages", {{{"role", "user"}, {"content", prompts[i]}}}},
          {"max_tokens", kTokens},
          {"temperature", 0},
          {"logprobs", true},
          {"return_tokens_as_token_ids", true},
          {"stream", true}};
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      if (!r || r->status != 200) return;
      bool d = false;
      streamed[i] = StreamedContent(r->body, &d, &streamed_ids[i]);
      done[i] = d;
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(done[i]) << prompts[i];
    EXPECT_EQ(streamed_ids[i], alone_ids[i]) << prompts[i];
    EXPECT_EQ(streamed[i], alone_text[i]) << prompts[i];
  }
  // They really ran together: some step carried several sequences.
  EXPECT_GT(queue_->widest_step(), 1u);
}

// One request running and one waiting fill a queue of one: the others are
// told 429 at once, and every accepted one completes.
TEST_F(ServeTest, FullQueueIs429) {
  StartServer("", /*max_queue=*/1, /*max_batch=*/1);
  std::vector<int> status(6, 0);
  std::vector<std::string> retry_after(6);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < status.size(); ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_read_timeout(120, 0);
      auto r = c.Post("/v1/completions",
                      R"({"prompt": "Once upon a time", "max_tokens": 500,
                          "stop": ["zzz"]})",
                      "application/json");
      status[i] = r ? r->status : -1;
      if (r) retry_after[i] = r->get_header_value("Retry-After");
    });
  }
  for (std::thread& t : clients) t.join();
  const int ok = std::count(status.begin(), status.end(), 200);
  const int busy = std::count(status.begin(), status.end(), 429);
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);
  EXPECT_EQ(ok + busy, 6);
  // A client told 429 is told when to come back.
  for (size_t i = 0; i < status.size(); ++i) {
    EXPECT_EQ(retry_after[i], status[i] == 429 ? "1" : "") << i;
  }
}

TEST_F(ServeTest, StopStringEndsTheText) {
  StartServer();
  const std::string full = ReferenceText(40);
  const size_t at = full.find(" girl");
  ASSERT_NE(at, std::string::npos) << full;
  auto [status, body] = Post("/v1/completions",
                             R"({"prompt": "Once upon a time", "max_tokens": 40,
                                 "stop": [" girl", "zzz"]})");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["choices"][0]["text"], full.substr(0, at));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

// Agents ask for more tokens than the context holds (Claude Code: 32000)
// and name their own models (gpt-4o): the reply stops at the context's end
// with "length" and names the model served. --strict-model-name keeps 404.
TEST_F(ServeTest, MaxTokensIsACapAndAnyModelNameIsAnswered) {
  StartServer();
  auto [status, body] =
      Post("/v1/completions",
           R"({"prompt": [1, 2, 3], "max_tokens": 100000, "model": "gpt-4o",
          "ignore_eos": true, "temperature": 0, "n_predict": 100000,
          "prompt_cache_key": "k", "safety_identifier": "s",
          "cache_prompt": true, "repeat_penalty": 1.0, "min_tokens": 0})");
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["model"], "stories260k-moe");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 512 - 3);
  // Fields that would change the output and are not built stay refused.
  std::tie(status, body) =
      Post("/v1/completions", R"({"prompt": "x", "min_tokens": 5})");
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.dump().find("min_tokens"), std::string::npos) << body.dump();
  TearDown();
  strict_model_name_ = true;
  StartServer();
  std::tie(status, body) =
      Post("/v1/completions", R"({"prompt": "x", "model": "gpt-4"})");
  EXPECT_EQ(status, 404);
  EXPECT_NE(body.dump().find("gpt-4"), std::string::npos) << body.dump();
}

TEST_F(ServeTest, BadRequestsGetUsefulErrors) {
  StartServer();
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, "not valid JSON"},
      // Refused before a DOM is built: a field named twice (which one
      // wins is not said by JSON), a body nested past 64 levels.
      {"/v1/completions", R"({"prompt": "x", "prompt": "y"})", 400,
       "duplicate key \"prompt\""},
      {"/v1/completions",
       "{\"prompt\": " + std::string(5000, '[') + std::string(5000, ']') + "}",
       400, "nested deeper than 64 levels"},
      {"/v1/completions", R"({"prompt": 5})", 400, "prompt must be"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -1})", 400,
       "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400,
       "temperature"},
      {"/v1/completions", R"({"prompt": "x", "n": 2})", 400, "n must be"},
      {"/v1/completions", R"({"prompt": "x", "logprobs": 21})", 400,
       "logprobs"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       400, "needs logprobs"},
      {"/v1/completions", R"({"prompt": [1, 999]})", 400,
       "outside the vocabulary"},
      {"/v1/completions", "{\"prompt\": \"\xff\xfe\"}", 400, "UTF-8"},
      {"/v1/completions", R"({"prompt": ")" + std::string(400, 'a') + R"("})",
       400, "the limit is 64 (--max-prompt-tokens raises it)"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "robot"},
  };
  for (const Case& c : cases) {
    auto [status, body] = Post(c.path, c.body);
    EXPECT_EQ(status, c.status) << c.body;
    ASSERT_TRUE(body.contains("error")) << c.body << " -> " << body.dump();
    EXPECT_NE(body["error"]["message"].get<std::string>().find(c.needle),
              std::string::npos)
        << c.body << " -> " << body.dump();
  }
}

TEST_F(ServeTest, ApiKey) {
  StartServer("s3cret");
  const std::string req = R"({"prompt": "Once", "max_tokens": 2})";
  EXPECT_EQ(Post("/v1/completions", req).first, 401);
  EXPECT_EQ(
      Post("/v1/completions", req, {{"Authorization", "Bearer nope"}}).first,
      401);
  EXPECT_EQ(
      Post("/v1/completions", req, {{"Authorization", "Bearer s3cret"}}).first,
      200);
  auto h = client_->Get("/healthz");  // health needs no key
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

// A refused POST's body must be read before the answer: on a keep-alive
// connection, unread bytes were parsed as the next request (which then got
// "400 (no body)"; the OpenAI Node client hit it after a 401).
TEST_F(ServeTest, ARefusedPostLeavesTheConnectionUsable) {
  StartServer("s3cret");
  httplib::Client client("127.0.0.1", server_->port());
  client.set_keep_alive(true);
  const std::string req =
      R"({"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0})";
  for (int i = 0; i < 3; ++i) {
    auto refused =
        client.Post("/v1/completions", {{"Authorization", "Bearer nope"}}, req,
                    "application/json");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 401);
    auto ok =
        client.Post("/v1/completions", {{"Authorization", "Bearer s3cret"}},
                    req, "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
  }
}

TEST_F(ServeTest, PrefixReuseSkipsTheKnownTurn) {
  const Turns turns = ReferenceTurns();
  const std::string without = TextWithoutCache(IdsRequest(turns.second, 12));
  StartServer("", 64, 8, /*prefix_cache_bytes=*/64 << 20);
  auto [s1, b1] = Post("/v1/completions", IdsRequest(turns.first, 20));
  ASSERT_EQ(s1, 200) << b1.dump();
  EXPECT_EQ(queue_->prefix_hits(), 0u);
  auto [s2, b2] = Post("/v1/completions", IdsRequest(turns.second, 12));
  ASSERT_EQ(s2, 200) << b2.dump();
  EXPECT_EQ(b2["choices"][0]["text"], without);
  EXPECT_EQ(b2["usage"]["prompt_tokens"], 35);
  // The kept state holds the first prompt and the 19 replies it ran.
  EXPECT_EQ(queue_->prefix_hits(), 1u);
  EXPECT_EQ(queue_->reused_tokens(), 5u + 19u);
}

// Issue 46 item 7: each turn of a chat resumes from the previous one, on
// the OpenAI and the Anthropic route, and says so in its usage; the text is
// what a server without a cache gives.
TEST_F(ServeTest, ChatTurnsResumeFromThePreviousTurnAndSaySo) {
  for (const std::string route : {"/v1/chat/completions", "/v1/messages"}) {
    SCOPED_TRACE(route);
    const bool anthropic = route == "/v1/messages";
    StartServer("", 64, 8, /*prefix_cache_bytes=*/64 << 20);
    json messages = json::array();
    size_t previous_prompt = 0;
    std::vector<std::string> replies;
    for (const char* user : {"Once upon a time", "Then what?", "The end?"}) {
      messages.push_back({{"role", "user"}, {"content", user}});
      std::string text;
      const json reply = ChatTurn(route, messages, &text);
      ASSERT_FALSE(reply.empty());
      const auto [prompt, cached] = PromptAndCached(reply, anthropic);
      if (previous_prompt == 0) {
        EXPECT_EQ(cached, 0u);
      } else {
        EXPECT_GE(cached, previous_prompt) << "prompt " << prompt;
        EXPECT_LT(cached, prompt);
      }
      previous_prompt = prompt;
      replies.push_back(text);
      messages.push_back({{"role", "assistant"}, {"content", text}});
    }
    TearDown();
    // The last turn without a cache: the same reply.
    StartServer();
    messages.erase(messages.end() - 1);
    std::string again;
    ChatTurn(route, messages, &again);
    EXPECT_EQ(again, replies.back());
    TearDown();
  }
}

TEST(PrefixCacheTest, LongestProperPrefixAndBudget) {
  struct Fake : ModelSequence {
    size_t n;
    explicit Fake(size_t n) : n(n) {}
    size_t bytes() const override { return n; }
    std::unique_ptr<ModelSequence> Clone() const override {
      return std::make_unique<Fake>(n);
    }
  };
  PrefixCache cache(1000);
  cache.Put({1, 2}, std::make_unique<Fake>(100));
  cache.Put({1, 2, 3, 4}, std::make_unique<Fake>(200));
  size_t len = 0;
  EXPECT_EQ(cache.Find({1, 2, 3, 4}, &len)->bytes(), 100u);  // proper only
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(cache.Find({1, 2, 3, 4, 5}, &len)->bytes(), 200u);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(cache.Find({2, 2, 3}, &len), nullptr);
  cache.Put({7}, std::make_unique<Fake>(900));  // evicts the least recent
  EXPECT_LE(cache.bytes(), 1000u);
  EXPECT_EQ(cache.Find({1, 2, 3}, &len), nullptr);
  cache.Put({8}, std::make_unique<Fake>(5000));  // above the budget: dropped
  EXPECT_EQ(cache.Find({8, 1}, &len), nullptr);
}

// A state that can go back serves the longest common beginning of its ids
// and a prompt: a repeated request, or a turn that renders the reply
// otherwise, resumes there instead of from scratch.
TEST(PrefixCacheTest, TheLongestCommonPrefixIsServedByCuttingBack) {
  struct Cuttable : ModelSequence {
    size_t n;
    explicit Cuttable(size_t n) : n(n) {}
    size_t bytes() const override { return 8 * n; }
    std::unique_ptr<ModelSequence> Clone() const override {
      return std::make_unique<Cuttable>(n);
    }
    bool Truncate(size_t positions) override {
      if (positions > n) return false;
      n = positions;
      return true;
    }
  };
  PrefixCache cache(1000);
  cache.Put({1, 2, 3, 4, 5}, std::make_unique<Cuttable>(5));
  size_t len = 0;
  // The same prompt again: all but its last id (which must run for logits).
  std::unique_ptr<ModelSequence> s = cache.Find({1, 2, 3, 4, 5}, &len);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(static_cast<Cuttable&>(*s).n, 4u);
  // A prompt that leaves the kept ids after 3 of them.
  s = cache.Find({1, 2, 3, 9, 9, 9}, &len);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(static_cast<Cuttable&>(*s).n, 3u);
  // The kept state itself is untouched.
  s = cache.Find({1, 2, 3, 4, 5, 6}, &len);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(len, 5u);
  EXPECT_EQ(cache.Find({7, 1, 2}, &len), nullptr);
  EXPECT_EQ(UsablePrefix({1, 2, 3}, {1, 2}), 1u);
  EXPECT_EQ(UsablePrefix({1, 2, 3}, {}), 0u);
}

TEST(StopTextTest, HoldsBackPossibleStarts) {
  StopText s({"END"});
  EXPECT_EQ(s.Feed("abcE"), "abc");
  EXPECT_EQ(s.Feed("N"), "");
  EXPECT_EQ(s.Feed("x"), "ENx");
  EXPECT_EQ(s.Feed("yE"), "y");
  EXPECT_EQ(s.Feed("ND tail"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.Flush(), "");
  StopText none({});
  EXPECT_EQ(none.Feed("abc"), "abc");
}

TEST(ChatTemplateTest, Renders) {
  const std::vector<ChatMessage> m = {{"system", "Be brief."},
                                      {"user", "Hi"},
                                      {"assistant", "Hello."},
                                      {"user", "Bye"}};
  EXPECT_EQ(RenderChat(ChatTemplate::kChatMl, m),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
            "<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama2, m),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
            "<s>[INST] Bye [/INST]");
  EXPECT_EQ(RenderChat(ChatTemplate::kKimi, {{"user", "Hello"}}),
            "[BOS]<|open|>user<|sep|>Hello<|close|><|open|>assistant<|sep|>");
  EXPECT_EQ(
      RenderChat(ChatTemplate::kPlain, {{"user", "Once"}, {"user", "upon"}}),
      "Once\nupon");
  // The stories model's tokenizer_config.json names no template: its
  // family's built-in one stands.
  absl::StatusOr<ChatFormat> plain =
      ChatFormat::Load(ModelDir(), ChatTemplate::kPlain, "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->description(), "plain (built in)");
  // A template the model names is rendered (Jinja), special tokens and all.
  const std::string dir = ::testing::TempDir() + "/chatml_model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>"}, "chat_template": "{{ bos_token }})"
         R"({% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }})"
         R"(<|im_end|>{% endfor %}{% if add_generation_prompt %}A:{% endif %}"})";
  absl::StatusOr<ChatFormat> jinja = ChatFormat::Load(dir, ChatTemplate::kKimi, "");
  ASSERT_TRUE(jinja.ok()) << jinja.status();
  EXPECT_EQ(jinja->description(), "jinja (tokenizer_config.json)");
  CompletionRequest request;
  request.messages = {{"user", "Hi"}};
  request.messages[0].view = {{"role", "user"}, {"content", "Hi"}};
  EXPECT_EQ(*jinja->Render(request), "<s><|im_start|>user\nHi<|im_end|>A:");
  // --chat-template: a built-in name wins over the folder's template.
  EXPECT_EQ(ChatFormat::Load(dir, ChatTemplate::kKimi, "chatml")->description(),
            "chatml (built in)");
  EXPECT_FALSE(ChatFormat::Load(dir, ChatTemplate::kKimi, "nosuch").ok());
  EXPECT_FALSE(ParseChatTemplate("jinja").ok());
}

}  // namespace
}  // namespace flotilla::coordinator::serve
