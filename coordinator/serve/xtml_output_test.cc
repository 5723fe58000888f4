// Kimi K3's XTML replies: channels into reasoning and content, calls into
// tool calls, the same whether the text comes whole or a byte at a time.
#include "coordinator/serve/xtml_output.h"

#include <filesystem>
#include <string>
#include <vector>

#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/completion_request.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {
namespace {

struct Parsed {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  std::string streamed_reasoning, streamed_content;
  std::vector<ToolCallDelta> streamed_calls;
};

Parsed Parse(const std::string& channel, bool tools, const std::string& text,
             size_t piece) {
  XtmlOutput out(channel, tools);
  Parsed p;
  auto take = [&](const ChatDelta& d) {
    p.streamed_reasoning += d.reasoning;
    p.streamed_content += d.content;
    for (const ToolCallDelta& t : d.tool_calls) p.streamed_calls.push_back(t);
  };
  for (size_t i = 0; i < text.size(); i += piece) {
    take(out.Feed(text.substr(i, piece)));
  }
  take(out.Finish());
  p.reasoning = out.reasoning();
  p.content = out.content();
  p.calls = out.tool_calls();
  return p;
}

constexpr char kReply[] =
    "Let me look.<|close|>think<|sep|><|open|>response<|sep|>Checking the "
    "weather.<|close|>response<|sep|><|open|>tools<|sep|>"
    "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Oslo \"&\" "
    "Bergen<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument"
    "<|sep|><|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"a\":[1]}"
    "<|close|>argument<|sep|><|close|>call<|sep|>"
    "<|open|>call tool=\"a&quot;b\" index=\"2\"<|sep|><|open|>json "
    "type=\"object\"<|sep|> {\"x\": true} <|close|>json<|sep|><|close|>call"
    "<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

TEST(XtmlOutputTest, ChannelsAndCallsWholeOrByteByByte) {
  for (size_t piece : {sizeof(kReply), size_t{1}, size_t{5}}) {
    SCOPED_TRACE(piece);
    const Parsed p = Parse("think", true, kReply, piece);
    EXPECT_EQ(p.reasoning, "Let me look.");
    EXPECT_EQ(p.content, "Checking the weather.");
    EXPECT_EQ(p.streamed_reasoning, p.reasoning);
    EXPECT_EQ(p.streamed_content, p.content);
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments),
              nlohmann::json::parse(
                  R"({"city":"Oslo \"&\" Bergen","days":3,"opts":{"a":[1]}})"));
    EXPECT_EQ(p.calls[1].name, "a\"b");
    EXPECT_EQ(p.calls[1].arguments, R"({"x": true})");
    ASSERT_EQ(p.streamed_calls.size(), 2u);
    EXPECT_EQ(p.streamed_calls[1].index, 1);
    EXPECT_EQ(p.streamed_calls[1].id, p.calls[1].id);
    EXPECT_EQ(p.streamed_calls[1].arguments, p.calls[1].arguments);
  }
}

TEST(XtmlOutputTest, WithoutToolsCallsAreContentAndTextMayLookLikeMarkers) {
  const Parsed p = Parse("response", false,
                         "Hi <|op and <|close|>response<|sep|><|open|>tools"
                         "<|sep|><|open|>call tool=\"f\"<|sep|>"
                         "<|close|>call<|sep|><|close|>tools<|sep|>",
                         3);
  EXPECT_EQ(p.content,
            "Hi <|op and <|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>"
            "<|close|>call<|sep|><|close|>tools<|sep|>");
  EXPECT_TRUE(p.calls.empty());
  // A reply cut short: what was held back as a possible marker is text.
  const Parsed cut = Parse("response", true, "The end <|clo", 2);
  EXPECT_EQ(cut.content, "The end <|clo");
  // No channel opened by the prompt: text is content until one opens.
  const Parsed bare = Parse("", true, "plain", 1);
  EXPECT_EQ(bare.content, "plain");
  // A string argument keeps its text; a bad number is kept as text.
  const Parsed odd = Parse(
      "response", true,
      "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"g\" "
      "index=\"1\"<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>"
      "three<|close|>argument<|sep|><|close|>call<|sep|>",
      4);
  ASSERT_EQ(odd.calls.size(), 1u);
  EXPECT_EQ(odd.calls[0].arguments, R"({"n":"three"})");
}

// What Kimi K3's own template writes for an assistant turn (reasoning,
// content, calls of every argument type) reads back as that turn.
TEST(XtmlOutputTest, TheTemplatesOwnAssistantTurnReadsBack) {
  const std::string dir = ::testing::TempDir() + "/xtml_template";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(
      std::string(FLOTILLA_JINJA_TESTDATA) + "/templates/kimi_k3.jinja",
      dir + "/chat_template.jinja",
      std::filesystem::copy_options::overwrite_existing);
  auto format = ChatFormat::Load(dir, ChatTemplate::kPlain, "");
  ASSERT_TRUE(format.ok()) << format.status();
  ASSERT_EQ(format->tool_syntax(), ToolSyntax::kXtml);
  RequestLimits limits;
  auto request = ParseCompletionRequest(R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": "Looking it up.",
       "reasoning_content": "They want the weather.",
       "tool_calls": [{"id": "c1", "type": "function", "function": {
         "name": "get_weather",
         "arguments": "{\"city\": \"Oslo\", \"days\": 3, \"hourly\": false, \"tags\": [\"a\"]}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "user", "content": "Thanks"}],
      "tools": [{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object"}}}]})",
                                        /*chat=*/true, limits);
  ASSERT_TRUE(request.ok()) << request.status();
  auto text = format->Render(*request, 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string open = "<|open|>message role=\"assistant\"<|sep|>";
  const size_t from = text->find(open);
  ASSERT_NE(from, std::string::npos) << *text;
  const size_t to = text->find("<|end_of_msg|>", from);
  const std::string turn =
      text->substr(from + open.size(), to + 14 - from - open.size());
  const Parsed p = Parse("", true, turn, 7);
  EXPECT_EQ(p.reasoning, "They want the weather.") << turn;
  EXPECT_EQ(p.content, "Looking it up.");
  ASSERT_EQ(p.calls.size(), 1u) << turn;
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(
      nlohmann::json::parse(p.calls[0].arguments),
      nlohmann::json::parse(
          R"({"city": "Oslo", "days": 3, "hourly": false, "tags": ["a"]})"));
}

}  // namespace
}  // namespace flotilla::coordinator::serve
