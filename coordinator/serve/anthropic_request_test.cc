// The Messages API request as Claude Code sends it, translated into the
// chat-completion body the server runs.
#include "coordinator/serve/anthropic_request.h"

#include <string>

#include "gtest/gtest.h"

namespace flotilla::coordinator::serve {
namespace {

using Json = nlohmann::ordered_json;

Json Chat(const std::string& body) {
  auto chat = AnthropicToChat(body, /*count_only=*/false);
  EXPECT_TRUE(chat.ok()) << chat.status() << "\n" << body;
  return chat.ok() ? *chat : Json();
}

std::string Refusal(const std::string& body) {
  auto chat = AnthropicToChat(body, /*count_only=*/false);
  EXPECT_FALSE(chat.ok()) << body;
  return chat.ok() ? "" : std::string(chat.status().message());
}

TEST(AnthropicRequestTest, ClaudeCodesRequestShapeIsAccepted) {
  const Json chat = Chat(R"({
    "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
    "system": [{"type": "text", "text": "You are an agent.",
                "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "Be brief."}],
    "messages": [
      {"role": "system", "content": "Folder: /tmp."},
      {"role": "user", "content": [
         {"type": "text", "text": "List the files.",
          "cache_control": {"type": "ephemeral"}}]},
      {"role": "system", "content": [{"type": "text", "text": "Late note."}]}
    ],
    "tools": [
      {"name": "Bash", "description": "Runs a command",
       "input_schema": {"type": "object",
                        "properties": {"command": {"type": "string"}}},
       "cache_control": {"type": "ephemeral"}},
      {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    ],
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": []},
    "output_config": {"effort": "high"},
    "metadata": {"user_id": "u1"}
  })");
  ASSERT_TRUE(chat.contains("messages"));
  const Json& m = chat["messages"];
  ASSERT_EQ(m.size(), 2u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"],
            "You are an agent.Be brief.\n\nFolder: /tmp.\n\nLate note.");
  EXPECT_EQ(m[1]["role"], "user");
  EXPECT_EQ(m[1]["content"], "List the files.");
  // The server tool is not offered; the custom one is.
  ASSERT_EQ(chat["tools"].size(), 1u) << chat["tools"].dump();
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "Bash");
  EXPECT_EQ(chat["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_EQ(chat["chat_template_kwargs"]["reasoning_effort"], "high");
  EXPECT_EQ(chat["max_tokens"], 32000);
}

TEST(AnthropicRequestTest, ThinkingAndOutputFormatReachTheTemplateAndMask) {
  const std::string base =
      R"({"model": "m", "max_tokens": 8,
          "messages": [{"role": "user", "content": "hi"}], )";
  EXPECT_EQ(Chat(base +
                 R"("thinking": {"type": "disabled"}})")["chat_template_kwargs"]
                                                        ["enable_thinking"],
            false);
  EXPECT_EQ(Chat(base + R"("thinking": {"type": "enabled",
                                        "budget_tokens": 1024}})")
                ["chat_template_kwargs"]["enable_thinking"],
            true);
  const Json format =
      Chat(base + R"("output_config": {"format": {"type": "json_schema",
                 "schema": {"type": "object"}}}})");
  EXPECT_EQ(format["response_format"]["type"], "json_schema");
  EXPECT_EQ(format["response_format"]["json_schema"]["schema"]["type"],
            "object");
  // No system anywhere: no system message.
  EXPECT_EQ(Chat(base + R"("metadata": {}})")["messages"][0]["role"], "user");
}

TEST(AnthropicRequestTest, WhatWouldChangeTheOutputUnbuiltIsRefused) {
  const std::string base =
      R"({"model": "m", "max_tokens": 8,
          "messages": [{"role": "user", "content": "hi"}], )";
  EXPECT_NE(
      Refusal(base + R"("thinking": {"type": "deep"}})").find("thinking.type"),
      std::string::npos);
  EXPECT_NE(Refusal(base + R"("output_config": {"task_budget": 5}})")
                .find("output_config.task_budget"),
            std::string::npos);
  EXPECT_NE(Refusal(base + R"("output_config": {"format": {"type": "x"}}})")
                .find("output_config.format"),
            std::string::npos);
  EXPECT_NE(Refusal(base + R"("frobnicate": 1})").find("frobnicate"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"model": "m", "max_tokens": 8, "messages": [
                {"role": "robot", "content": "hi"}]})")
                .find("messages.0.role"),
            std::string::npos);
}

}  // namespace
}  // namespace flotilla::coordinator::serve
