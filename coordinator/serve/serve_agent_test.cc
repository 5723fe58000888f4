// The agent features end to end on the stories model: forced tool calls
// and json_schema replies by constrained decoding (they parse and validate
// whatever the seed), tool results fed back, and constrained requests
// batched with others giving what they give alone.
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/serve_test_fixture.h"

namespace flotilla::coordinator::serve {
namespace {

constexpr char kTools[] = R"([
  {"type": "function", "function": {"name": "weather",
   "parameters": {"type": "object", "properties": {
     "city": {"type": "string", "maxLength": 20},
     "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add",
   "parameters": {"type": "object", "properties": {
     "a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"], "additionalProperties": false}}}])";

constexpr char kPersonSchema[] = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "pets": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "alive": {"type": "boolean"}},
  "required": ["name", "age", "pets", "alive"], "additionalProperties": false})";

std::string ChatBody(const std::string& extra, int seed, bool stream = false,
                     int max_tokens = 40) {
  return R"({"messages": [{"role": "user", "content": "Once upon a time"}],
             "max_tokens": )" +
         std::to_string(max_tokens) + R"(, "temperature": 1, "seed": )" +
         std::to_string(seed) + (stream ? R"(, "stream": true)" : "") + extra +
         "}";
}

// The arguments of weather/add as their schemas require.
void ExpectValidArguments(const std::string& name, const json& args) {
  ASSERT_TRUE(args.is_object());
  if (name == "weather") {
    ASSERT_TRUE(args.contains("city") && args["city"].is_string());
    EXPECT_LE(args["city"].get<std::string>().size(), 20u * 4);
    ASSERT_TRUE(args.contains("unit"));
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f");
    for (auto it = args.begin(); it != args.end(); ++it) {
      EXPECT_TRUE(it.key() == "city" || it.key() == "unit");
    }
  } else {
    ASSERT_EQ(name, "add");
    ASSERT_EQ(args.size(), 2u);
    EXPECT_TRUE(args["a"].is_number() && args["b"].is_number());
  }
}

TEST_F(ServeTest, ForcedToolCallsParseAndValidateAtTemperatureOne) {
  max_prompt_tokens_ = 470;  // the tool list takes about 400 tokens
  StartServer();
  for (int seed = 1; seed <= 6; ++seed) {
    auto [status, body] = Post(
        "/v1/chat/completions",
        ChatBody(std::string(R"(, "tools": )") + kTools +
                     R"(, "tool_choice": "required")",
                 seed));
    ASSERT_EQ(status, 200) << body;
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_TRUE(choice["message"]["content"].is_null());
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << body;
    const json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
    const json args =
        json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
    ExpectValidArguments(call["function"]["name"], args);
  }
}

// Issue 46 item 12: "required" with parallel_tool_calls may answer with
// several calls (1..8), each valid; without it, exactly one.
TEST_F(ServeTest, RequiredWithParallelCallsMayCallSeveralTimes) {
  max_prompt_tokens_ = 470;
  StartServer();
  for (int seed = 1; seed <= 6; ++seed) {
    auto [status, body] = Post(
        "/v1/chat/completions",
        ChatBody(
            std::string(R"(, "tools": )") + kTools +
                R"(, "tool_choice": "required", "parallel_tool_calls": true)",
            seed, false, 120));
    ASSERT_EQ(status, 200) << body;
    const json& choice = body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << body;
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_GE(calls.size(), 1u) << body;
    ASSERT_LE(calls.size(), 8u) << body;
    for (const json& call : calls) {
      ExpectValidArguments(
          call["function"]["name"],
          json::parse(call["function"]["arguments"].get<std::string>(), nullptr,
                      false));
    }
  }
}

TEST_F(ServeTest, NamedToolCallStreamsItsArguments) {
  max_prompt_tokens_ = 470;  // the tool list takes about 400 tokens
  StartServer();
  const std::string extra =
      std::string(R"(, "tools": )") + kTools +
      R"(, "tool_choice": {"type": "function", "function": {"name": "add"}})";
  for (int seed = 1; seed <= 3; ++seed) {
    auto [status, whole] = Post("/v1/chat/completions", ChatBody(extra, seed));
    ASSERT_EQ(status, 200) << whole;
    const json& call = whole["choices"][0]["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "add");
    ExpectValidArguments("add", json::parse(call["function"]["arguments"]
                                                .get<std::string>()));
    auto r = client_->Post("/v1/chat/completions", ChatBody(extra, seed, true),
                           "application/json");
    ASSERT_TRUE(r);
    bool done = false;
    std::string arguments, name, finish;
    for (const json& e : SseEvents(r->body, &done)) {
      const json& c = e["choices"][0];
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      if (!c["delta"].contains("tool_calls")) continue;
      const json& t = c["delta"]["tool_calls"][0];
      EXPECT_EQ(t["index"], 0);
      if (t["function"].contains("name")) name = t["function"]["name"];
      arguments += t["function"]["arguments"].get<std::string>();
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(name, "add");
    EXPECT_EQ(arguments, call["function"]["arguments"]) << "seed " << seed;
  }
}

TEST_F(ServeTest, JsonSchemaRepliesParseAndValidateAtTemperatureOne) {
  max_prompt_tokens_ = 470;  // the tool list takes about 400 tokens
  StartServer();
  const std::string extra =
      std::string(R"(, "response_format": {"type": "json_schema", )") +
      R"("json_schema": {"name": "person", "strict": true, "schema": )" +
      kPersonSchema + "}}";
  for (int seed = 1; seed <= 6; ++seed) {
    auto [status, body] =
        Post("/v1/chat/completions", ChatBody(extra, seed, false, 64));
    ASSERT_EQ(status, 200) << body;
    const std::string content = body["choices"][0]["message"]["content"];
    const json v = json::parse(content, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << content;
    ASSERT_EQ(v.size(), 4u) << content;
    EXPECT_TRUE(v["name"].is_string());
    EXPECT_TRUE(v["age"].is_number_integer());
    EXPECT_TRUE(v["pets"].is_array() && v["pets"].size() <= 3);
    EXPECT_TRUE(v["alive"].is_boolean());
  }
  auto [status, body] = Post(
      "/v1/chat/completions",
      ChatBody(R"(, "response_format": {"type": "json_object"})", 9));
  ASSERT_EQ(status, 200);
  // Too few tokens for the shortest valid reply (42 bytes): refused, as a
  // reply that may not parse would break the promise.
  auto [short_status, refusal] =
      Post("/v1/chat/completions", ChatBody(extra, 1, false, 30));
  EXPECT_EQ(short_status, 400);
  EXPECT_NE(refusal.dump().find("max_tokens (30) is below the 42"),
            std::string::npos)
      << refusal;
  const json v = json::parse(body["choices"][0]["message"]["content"].get<std::string>(),
                             nullptr, false);
  EXPECT_TRUE(v.is_object()) << body;
}

TEST_F(ServeTest, ToolResultsAreFedBackThroughTheTemplate) {
  max_prompt_tokens_ = 470;  // the tool list takes about 400 tokens
  StartServer();
  const std::string messages = R"("messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
        "type": "function", "function": {"name": "weather",
        "arguments": "{\"city\": \"Oslo\", \"unit\": \"c\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 18"}])";
  const std::string tools = json::parse(kTools)[0].dump();
  auto [tok_status, tokens] =
      Post("/tokenize", "{" + messages + R"(, "tools": [)" + tools + "]}");
  ASSERT_EQ(tok_status, 200) << tokens;
  const std::string prompt = *tokenizer_->Decode(tokens["tokens"]);
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\":\"weather\",\"arguments\":"
                        "{\"city\":\"Oslo\",\"unit\":\"c\"}}\n</tool_call>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<tool_response>\nsunny, 18\n</tool_response>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("\"name\":\"weather\""), std::string::npos);
  auto [status, body] = Post("/v1/chat/completions",
                             "{" + messages + R"(, "tools": [)" + tools +
                                 R"(], "max_tokens": 8})");
  ASSERT_EQ(status, 200) << body;
  EXPECT_TRUE(body["choices"][0]["message"]["content"].is_string());
}

TEST_F(ServeTest, TheTemplateSeesToolsDocumentsAndKwargs) {
  // A model folder whose template prints what it was given.
  const std::string dir = ::testing::TempDir() + "/template_inputs_model";
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(ModelDir() + "/" + f, dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::ofstream(dir + "/chat_template.jinja")
      << "{% for d in documents %}[{{ d.title }}]{% endfor %}"
         "{{ tools | map(attribute='function.name') | join(',') }}|"
         "{{ flavour }}|{{ messages[-1].content }}";
  auto format = ChatFormat::Load(dir, ChatTemplate::kPlain, "");
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(format->description(), "jinja (chat_template.jinja)");
  auto request = ParseCompletionRequest(
      std::string(R"({"messages": [{"role": "user", "content": "Hi"}],
          "documents": [{"title": "a"}, {"title": "b"}],
          "chat_template_kwargs": {"flavour": "mint"}, "tools": )") +
          kTools + "}",
      true, RequestLimits());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(*format->Render(*request), "[a][b]weather,add|mint|Hi");
}

// Issue 44 item 2: a template that multiplies the conversation stops at
// the prompt limit while it renders (/tokenize and chat had no cap, or one
// checked only after a 60 MB render), with an error naming the limit.
TEST_F(ServeTest, ARenderStopsAtThePromptLimit) {
  const std::string dir = ::testing::TempDir() + "/multiplying_template_model";
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(
        ModelDir() + "/" + f, dir + "/" + f,
        std::filesystem::copy_options::overwrite_existing);
  }
  std::ofstream(dir + "/chat_template.jinja")
      << "{% for i in range(100000) %}{{ messages[-1].content }}{% endfor %}";
  auto format = ChatFormat::Load(dir, ChatTemplate::kPlain, "");
  ASSERT_TRUE(format.ok()) << format.status();
  auto request = ParseCompletionRequest(
      R"({"messages": [{"role": "user", "content": "0123456789"}]})", true,
      RequestLimits());
  ASSERT_TRUE(request.ok()) << request.status();
  absl::StatusOr<std::string> text = format->Render(*request, 4096);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("template output passed 4096 bytes"),
            std::string::npos)
      << text.status();
  // Within the limit: the whole prompt.
  text = format->Render(*request, 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->size(), 1000000u);
}

// 16 requests at once, greedy, some constrained, some with tools: each
// equals its own run alone.
TEST_F(ServeTest, ConstrainedRequestsInABatchEqualTheirSoloRuns) {
  max_prompt_tokens_ = 470;
  StartServer("", 64, 16);
  std::vector<std::string> bodies;
  for (int i = 0; i < 16; ++i) {
    std::string extra;
    if (i % 4 == 1) {
      extra = std::string(R"(, "response_format": {"type": "json_schema", )") +
              R"("json_schema": {"name": "p", "schema": )" + kPersonSchema + "}}";
    } else if (i % 4 == 2) {
      extra = std::string(R"(, "tools": )") + kTools + R"(, "tool_choice": "required")";
    } else if (i % 4 == 3) {
      extra = std::string(R"(, "tools": )") + kTools;
    }
    bodies.push_back(
        R"({"messages": [{"role": "user", "content": "Lily had a )" +
        std::to_string(i) + R"( cats"}], "max_tokens": 48, "temperature": 0)" +
        extra + "}");
  }
  std::vector<json> solo;
  for (const std::string& b : bodies) {
    auto [status, body] = Post("/v1/chat/completions", b);
    ASSERT_EQ(status, 200) << body;
    solo.push_back(body["choices"][0]);
  }
  std::vector<std::future<std::pair<int, json>>> together;
  for (const std::string& b : bodies) {
    together.push_back(std::async(std::launch::async, [this, b] {
      httplib::Client client("127.0.0.1", server_->port());
      client.set_read_timeout(300, 0);
      auto r = client.Post("/v1/chat/completions", b, "application/json");
      return std::make_pair(r ? r->status : -1,
                            r ? json::parse(r->body, nullptr, false) : json());
    }));
  }
  for (size_t i = 0; i < together.size(); ++i) {
    auto [status, body] = together[i].get();
    ASSERT_EQ(status, 200) << body;
    json got = body["choices"][0], want = solo[i];
    // Tool call ids are fresh per reply.
    for (json* c : {&got, &want}) {
      if ((*c)["message"].contains("tool_calls")) {
        for (json& t : (*c)["message"]["tool_calls"]) t.erase("id");
      }
    }
    EXPECT_EQ(got, want) << "request " << i;
  }
  // How many ran together depends on timing, so it is reported, not
  // asserted (ServeTest.SixteenConcurrentStreamsEachAsAlone asserts
  // batching for plain requests).
  std::printf("widest step: %zu sequences\n", queue_->widest_step());
}

// OpenAI's Responses API end to end: a plain reply (the chat route's
// text), its event stream in the API's order, and a forced function call
// whose output is fed back as Codex does.
TEST_F(ServeTest, ResponsesApiAnswersStreamsAndCallsFunctions) {
  max_prompt_tokens_ = 470;
  StartServer();
  auto [cs, chat] = Post("/v1/chat/completions",
                         R"({"messages": [{"role": "user", "content":
                             "Once upon a time"}], "max_tokens": 16,
                             "temperature": 0})");
  ASSERT_EQ(cs, 200) << chat.dump();
  auto [status, r] = Post("/v1/responses",
                          R"({"model": "gpt-5", "input": "Once upon a time",
                              "max_output_tokens": 16, "temperature": 0,
                              "store": false})");
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["model"], "stories260k-moe");
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"],
            chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(r["status"], chat["choices"][0]["finish_reason"] == "length"
                             ? "incomplete"
                             : "completed");
  EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);

  // Streamed: the events in order, numbered, ending in the same text.
  auto stream =
      client_->Post("/v1/responses",
                    R"({"input": "Once upon a time", "max_output_tokens": 16,
          "temperature": 0, "stream": true})",
                    "application/json");
  ASSERT_TRUE(stream);
  std::vector<std::string> types;
  std::string text, done_text;
  int sequence = 0;
  for (absl::string_view view : absl::StrSplit(stream->body, '\n')) {
    const std::string line(view);
    if (line.rfind("data: ", 0) != 0) continue;
    const json e = json::parse(line.substr(6));
    EXPECT_EQ(e["sequence_number"], sequence++);
    types.push_back(e["type"]);
    if (e["type"] == "response.output_text.delta") text += e["delta"];
    if (e["type"] == "response.output_text.done") done_text = e["text"];
  }
  ASSERT_GE(types.size(), 8u) << stream->body;
  EXPECT_EQ(types[0], "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types[2], "response.output_item.added");
  EXPECT_EQ(types[3], "response.content_part.added");
  EXPECT_EQ(types[4], "response.output_text.delta");
  EXPECT_TRUE(types.back() == "response.completed" ||
              types.back() == "response.incomplete")
      << types.back();
  EXPECT_EQ(text, r["output"][0]["content"][0]["text"]);
  EXPECT_EQ(done_text, text);

  // A forced call, then its output fed back: answered with a message.
  const std::string tools = R"([{"type": "function", "name": "add",
      "parameters": {"type": "object", "properties": {
        "a": {"type": "number"}, "b": {"type": "number"}},
      "required": ["a", "b"], "additionalProperties": false}},
      {"type": "web_search"}])";
  std::tie(status, r) =
      Post("/v1/responses",
           R"({"input": [{"role": "user", "content": [{"type": "input_text",
          "text": "Once upon a time"}]}], "tools": )" +
               tools +
               R"(, "tool_choice": "required", "max_output_tokens": 40,
          "temperature": 1, "seed": 3})");
  ASSERT_EQ(status, 200) << r.dump();
  ASSERT_EQ(r["status"], "completed") << r.dump();
  const json* call = nullptr;
  for (const json& item : r["output"]) {
    if (item["type"] == "function_call") call = &item;
  }
  ASSERT_NE(call, nullptr) << r.dump();
  EXPECT_EQ((*call)["name"], "add");
  ExpectValidArguments("add",
                       json::parse((*call)["arguments"].get<std::string>()));
  const json next = {{"input",
                      {{{"role", "user"}, {"content", "Once upon a time"}},
                       {{"type", "function_call"},
                        {"call_id", (*call)["call_id"]},
                        {"name", "add"},
                        {"arguments", (*call)["arguments"]}},
                       {{"type", "function_call_output"},
                        {"call_id", (*call)["call_id"]},
                        {"output", "3"}}}},
                     {"tools", json::parse(tools)},
                     {"max_output_tokens", 8},
                     {"temperature", 0}};
  std::tie(status, r) = Post("/v1/responses", next.dump());
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_FALSE(r["output"].empty()) << r.dump();
}

}  // namespace
}  // namespace flotilla::coordinator::serve
