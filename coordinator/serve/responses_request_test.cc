// The Responses API request as Codex sends it, translated into the chat
// body the server runs; what would change the output unbuilt is refused.
#include "coordinator/serve/responses_request.h"

#include <string>

#include "gtest/gtest.h"

namespace flotilla::coordinator::serve {
namespace {

TEST(ResponsesRequestTest, CodexsRequestShapeIsAccepted) {
  auto r = ResponsesToChat(R"({
    "model": "gpt-5-codex", "instructions": "You are Codex.",
    "input": [
      {"type": "message", "role": "developer",
       "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
      {"type": "message", "role": "user",
       "content": [{"type": "input_text", "text": "<env>cwd</env>"},
                   {"type": "input_text", "text": "List the files."}]},
      {"type": "reasoning", "summary": [], "encrypted_content": "x"},
      {"type": "message", "role": "assistant",
       "content": [{"type": "output_text", "text": "Running ls."}]},
      {"type": "function_call", "call_id": "call_1", "name": "shell",
       "arguments": "{\"command\":[\"ls\"]}"},
      {"type": "function_call_output", "call_id": "call_1",
       "output": "a.txt"}
    ],
    "tools": [
      {"type": "function", "name": "shell", "description": "Runs",
       "strict": false, "parameters": {"type": "object",
         "properties": {"command": {"type": "array",
                                    "items": {"type": "string"}}}}},
      {"type": "web_search"},
      {"type": "namespace", "name": "mcp"}
    ],
    "tool_choice": "auto", "parallel_tool_calls": false,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": false, "stream": true,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "k", "client_metadata": {"a": "b"},
    "text": {"verbosity": "low"}
  })");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& m = r->chat["messages"];
  ASSERT_EQ(m.size(), 4u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "You are Codex.\n\nSandbox: read-only.");
  EXPECT_EQ(m[1]["content"], "<env>cwd</env>List the files.");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "Running ls.");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "shell");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "call_1");
  EXPECT_EQ(m[3]["content"], "a.txt");
  ASSERT_EQ(r->chat["tools"].size(), 1u);
  EXPECT_EQ(r->chat["tools"][0]["function"]["name"], "shell");
  EXPECT_EQ(r->skipped_tools,
            (std::vector<std::string>{"web_search", "namespace"}));
  EXPECT_EQ(r->chat["chat_template_kwargs"]["reasoning_effort"], "medium");
  EXPECT_EQ(r->chat["stream"], true);
  EXPECT_EQ(r->echo["instructions"], "You are Codex.");
}

TEST(ResponsesRequestTest, FormatsAndLimitsBecomeChatFields) {
  auto r = ResponsesToChat(R"({"input": "hi", "max_output_tokens": 7,
      "text": {"format": {"type": "json_schema", "name": "x",
                          "schema": {"type": "object"}, "strict": true}},
      "tool_choice": {"type": "function", "name": "f"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chat["messages"][0]["content"], "hi");
  EXPECT_EQ(r->chat["max_tokens"], 7);
  EXPECT_EQ(r->chat["response_format"]["json_schema"]["name"], "x");
  EXPECT_EQ(r->chat["tool_choice"]["function"]["name"], "f");
}

TEST(ResponsesRequestTest, WhatCannotBeHonouredIsRefusedNamingIt) {
  for (const auto& [body, needle] :
       std::vector<std::pair<std::string, std::string>>{
           {R"({"input": "hi", "previous_response_id": "resp_1"})",
            "previous_response_id"},
           {R"({"input": "hi", "conversation": "c"})", "conversation"},
           {R"({"input": "hi", "background": true})", "background"},
           {R"({"input": "hi", "truncation": "auto"})", "truncation"},
           {R"({"input": [{"role": "user", "content": [
                {"type": "input_image", "image_url": "x"}]}]})",
            "input_image"},
           {R"({"input": [{"type": "web_search_call"}]})", "web_search_call"},
           {R"({"input": "hi", "frobnicate": 1})", "frobnicate"},
           {R"({"input": "hi", "tool_choice": {"type": "web_search"}})",
            "tool_choice"},
           {R"({"instructions": "x"})", "input"},
       }) {
    auto r = ResponsesToChat(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace flotilla::coordinator::serve
