#include "coordinator/serve/chat_output.h"

#include <string>

#include "gtest/gtest.h"

namespace flotilla::coordinator::serve {
namespace {

// Feeds `text` in pieces of `step` bytes; returns the concatenated deltas
// as "R:<reasoning>|C:<content>|T:<name>(<arguments>);..." with Finish's.
std::string Split(ChatOutputOptions options, const std::string& text,
                size_t step) {
  ChatOutput out(std::move(options));
  std::string reasoning, content, calls;
  auto take = [&](const ChatDelta& d) {
    reasoning += d.reasoning;
    content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (!t.name.empty()) calls += (calls.empty() ? "" : ";") + t.name + ":";
      calls += t.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) take(out.Feed(text.substr(i, step)));
  take(out.Finish());
  // What the deltas add up to is what the whole reply says.
  EXPECT_EQ(reasoning, out.reasoning());
  EXPECT_EQ(content, out.content());
  return "R:" + reasoning + "|C:" + content + "|T:" + calls;
}

TEST(ChatOutputTest, HermesCallsAreParsedInAnyChunking) {
  ChatOutputOptions o;
  o.syntax = ToolSyntax::kHermes;
  o.parse_tools = true;
  const std::string reply =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>{\"name\": \"add\", "
      "\"arguments\": {\"a\": 1}}</tool_call>";
  for (size_t step : {1, 3, 7, 1000}) {
    EXPECT_EQ(Split(o, reply, step),
              "R:|C:Let me check.\n|T:get_weather:{\"city\":\"Oslo\"};add:{\"a\":1}")
        << step;
  }
  // Not a call after all: the text comes back as content.
  EXPECT_EQ(Split(o, "a <tool_call>not json</tool_call>", 2),
            "R:|C:a <tool_call>not json</tool_call>|T:");
  EXPECT_EQ(Split(o, "1 < 2, <tool", 1), "R:|C:1 < 2, <tool|T:");
}

TEST(ChatOutputTest, ThinkTagsBecomeReasoning) {
  ChatOutputOptions o;
  o.think_tags = true;
  for (size_t step : {1, 4, 1000}) {
    EXPECT_EQ(Split(o, "<think>\nHmm, 7 is prime.\n</think>\n\nYes.", step),
              "R:Hmm, 7 is prime.|C:Yes.|T:");
    EXPECT_EQ(Split(o, "No tags here.", step), "R:|C:No tags here.|T:");
  }
  o.starts_in_reasoning = true;  // the template opened <think> itself
  EXPECT_EQ(Split(o, "Thinking...</think>Done", 3), "R:Thinking...|C:Done|T:");
  EXPECT_EQ(Split(o, "cut off mid-thought", 3), "R:cut off mid-thought|C:|T:");
}

TEST(ChatOutputTest, Llama3JsonCallIsTheWholeReply) {
  ChatOutputOptions o;
  o.syntax = ToolSyntax::kLlama3Json;
  o.parse_tools = true;
  EXPECT_EQ(Split(o, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": 2}}", 5),
            "R:|C:|T:f:{\"x\":2}");
  EXPECT_EQ(Split(o, "  Plain answer.", 5), "R:|C:  Plain answer.|T:");
}

TEST(ChatOutputTest, ForcedCallsAreTheConstrainedJson) {
  ChatOutputOptions named;
  named.forced = ToolChoice::kNamed;
  named.forced_name = "get_weather";
  EXPECT_EQ(Split(named, "{\"city\": \"Rome\"}", 4),
            "R:|C:|T:get_weather:{\"city\": \"Rome\"}");
  ChatOutputOptions required;
  required.forced = ToolChoice::kRequired;
  EXPECT_EQ(Split(required, "{\"name\":\"add\",\"arguments\":{\"a\":3}}", 4),
            "R:|C:|T:add:{\"a\":3}");
  // parallel_tool_calls: an array of calls, each a tool call.
  EXPECT_EQ(Split(required,
                  "[{\"name\":\"add\",\"arguments\":{\"a\":3}},"
                  "{\"name\":\"sub\",\"arguments\":{\"b\":1}}]",
                  4),
            "R:|C:|T:add:{\"a\":3};sub:{\"b\":1}");
}

TEST(ChatOutputTest, WithoutToolsTextIsContent) {
  ChatOutputOptions o;
  o.syntax = ToolSyntax::kHermes;  // but no tools were offered
  EXPECT_EQ(Split(o, "<tool_call>{\"name\": \"x\"}</tool_call>", 3),
            "R:|C:<tool_call>{\"name\": \"x\"}</tool_call>|T:");
}

}  // namespace
}  // namespace flotilla::coordinator::serve
