// The DeepSeek-V3 / R1 and Kimi K2 tool-call syntaxes through ChatOutput,
// as a streamed reply arrives in pieces of any size: content before the
// calls, every call's name and arguments (and Kimi K2's own ids), reasoning
// ahead of them (R1), and malformed sections returned as content.
#include "coordinator/serve/tool_call_syntax.h"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/serve/chat_output.h"
#include "gtest/gtest.h"

namespace flotilla::coordinator::serve {
namespace {

struct Reply {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// Feeds `text` in pieces of `step` bytes (UTF-8 characters cut apart too).
Reply Parse(ToolSyntax syntax, const std::string& text, size_t step,
            bool think = false) {
  ChatOutputOptions o;
  o.syntax = syntax;
  o.parse_tools = true;
  o.think_tags = think;
  ChatOutput out(o);
  std::string content;
  for (size_t i = 0; i < text.size(); i += step) {
    content += out.Feed(text.substr(i, step)).content;
  }
  content += out.Finish().content;
  EXPECT_EQ(content, out.content());
  return {out.reasoning(), out.content(), out.tool_calls()};
}

TEST(ToolCallSyntaxTest, DeepSeekV3CallsInAnyChunking) {
  const std::string reply =
      "Checking both.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
      "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```"
      "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n"
      "```json\n{\"a\": 1, \"b\": [2]}\n```<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  for (size_t step : {1, 2, 5, 13, 1000}) {
    SCOPED_TRACE(step);
    const Reply r = Parse(ToolSyntax::kDeepSeekV3, reply, step);
    EXPECT_EQ(r.content, "Checking both.");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Oslo\"}");
    EXPECT_EQ(r.calls[1].name, "add");
    EXPECT_EQ(r.calls[1].arguments, "{\"a\":1,\"b\":[2]}");
    EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
  }
  // V3.1 writes NAME<sep>ARGS.
  const Reply v31 = Parse(ToolSyntax::kDeepSeekV3,
                          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search"
                          "<｜tool▁sep｜>{\"q\": \"x\"}<｜tool▁call▁end｜>"
                          "<｜tool▁calls▁end｜>",
                          3);
  ASSERT_EQ(v31.calls.size(), 1u);
  EXPECT_EQ(v31.calls[0].name, "search");
  EXPECT_EQ(v31.calls[0].arguments, "{\"q\":\"x\"}");
}

TEST(ToolCallSyntaxTest, R1ReasoningThenACall) {
  const Reply r = Parse(
      ToolSyntax::kDeepSeekV3,
      "<think>\nThe user wants weather.\n</think>\n\n<｜tool▁calls▁begin｜>"
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{}\n"
      "```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      4, /*think=*/true);
  EXPECT_EQ(r.reasoning, "The user wants weather.");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
}

TEST(ToolCallSyntaxTest, KimiK2CallsKeepTheirIds) {
  const std::string reply =
      "On it. <|tool_calls_section_begin|><|tool_call_begin|>"
      "functions.get_weather:0<|tool_call_argument_begin|>{\"city\": "
      "\"Oslo\"}<|tool_call_end|><|tool_call_begin|>functions.add:1"
      "<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|>"
      "<|tool_calls_section_end|>";
  for (size_t step : {1, 3, 8, 1000}) {
    SCOPED_TRACE(step);
    const Reply r = Parse(ToolSyntax::kKimiK2, reply, step);
    EXPECT_EQ(r.content, "On it. ");
    ASSERT_EQ(r.calls.size(), 2u);
    // Kimi's template writes the id back as it came: functions.NAME:N.
    EXPECT_EQ(r.calls[0].id, "functions.get_weather:0");
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Oslo\"}");
    EXPECT_EQ(r.calls[1].id, "functions.add:1");
    EXPECT_EQ(r.calls[1].name, "add");
  }
}

TEST(ToolCallSyntaxTest, MalformedSectionsAreContent) {
  for (const auto& [syntax, text] :
       std::vector<std::pair<ToolSyntax, std::string>>{
           {ToolSyntax::kDeepSeekV3,
            "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
            "<｜tool▁sep｜>f\n```json\n{not json\n```<｜tool▁call▁end｜>"},
           {ToolSyntax::kDeepSeekV3, "x<｜tool▁calls▁begin｜>nothing"},
           {ToolSyntax::kKimiK2,
            "x<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
            "<|tool_call_argument_begin|>[1,<|tool_call_end|>"},
           {ToolSyntax::kKimiK2, "x<|tool_calls_section_begin|>"}}) {
    SCOPED_TRACE(text);
    const Reply r = Parse(syntax, text, 2);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCallSyntaxTest, NamesAndDetection) {
  for (const char* name : {"deepseek_v3", "kimi_k2", "hermes"}) {
    auto s = ParseToolSyntax(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_STREQ(ToolSyntaxName(*s), name);
    EXPECT_NE(SectionSyntaxOf(*s), nullptr);
  }
  EXPECT_EQ(SectionSyntaxOf(ToolSyntax::kLlama3Json), nullptr);
  // vLLM's name for gpt-oss's parser; harmony is read from ids.
  auto harmony = ParseToolSyntax("openai");
  ASSERT_TRUE(harmony.ok());
  EXPECT_EQ(*harmony, ToolSyntax::kHarmony);
  EXPECT_EQ(SectionSyntaxOf(ToolSyntax::kHarmony), nullptr);
  EXPECT_FALSE(ParseToolSyntax("deepseek").ok());
  auto xtml = ParseToolSyntax("kimi_k3");
  ASSERT_TRUE(xtml.ok());
  EXPECT_EQ(*xtml, ToolSyntax::kXtml);
}

// The published templates name their own syntax: a model folder holding
// DeepSeek-V3's, Kimi K2's, Qwen3's or gpt-oss's (harmony, parsed from
// ids: harmony_output.h) chat template is read with it.
TEST(ToolCallSyntaxTest, PublishedTemplatesSelectTheirSyntax) {
  for (const auto& [file, want] :
       std::vector<std::pair<std::string, ToolSyntax>>{
           {"deepseek_v3.jinja", ToolSyntax::kDeepSeekV3},
           {"kimi_k2.jinja", ToolSyntax::kKimiK2},
           {"kimi_k2_thinking.jinja", ToolSyntax::kKimiK2},
           {"qwen3.jinja", ToolSyntax::kHermes},
           {"gpt_oss.jinja", ToolSyntax::kHarmony},
           {"kimi_k3.jinja", ToolSyntax::kXtml}}) {
    SCOPED_TRACE(file);
    const std::string dir = ::testing::TempDir() + "/template_" + file;
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(
        std::string(FLOTILLA_JINJA_TESTDATA) + "/templates/" + file,
        dir + "/chat_template.jinja",
        std::filesystem::copy_options::overwrite_existing);
    auto format = ChatFormat::Load(dir, ChatTemplate::kPlain, "");
    ASSERT_TRUE(format.ok()) << format.status();
    EXPECT_EQ(format->tool_syntax(), want) << ToolSyntaxName(want);
    EXPECT_FALSE(format->think_tags() && want == ToolSyntax::kHarmony);
  }
}

}  // namespace
}  // namespace flotilla::coordinator::serve
