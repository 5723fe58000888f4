// Harmony replies (gpt-oss) parsed from the ids the real o200k_harmony
// vocabulary gives them: reasoning from the analysis channel, content from
// final, a message to=functions.NAME as a tool call with its JSON
// arguments; the same whether the ids arrive at once or one by one.
#include "coordinator/serve/harmony_output.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "shared/tokenizer/hf_tokenizer.h"
#include "shared/tokenizer/testdata_util.h"

namespace flotilla::coordinator::serve {
namespace {

const tokenizer::Tokenizer& GptOss() {
  static const tokenizer::Tokenizer* t = [] {
    const std::string dir =
        std::string(FLOTILLA_TOKENIZER_TESTDATA) + "/hf/gpt_oss";
    auto tok = tokenizer::HfTokenizer::FromJson(
        tokenizer::testing::ReadMaybeGz(dir + "/tokenizer.json.gz"),
        tokenizer::testing::ReadMaybeGz(dir + "/tokenizer_config.json"),
        "gpt_oss");
    EXPECT_TRUE(tok.ok()) << tok.status();
    return tok.ok() ? tok->release() : nullptr;
  }();
  return *t;
}

struct Parsed {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  std::string streamed_reasoning, streamed_content, streamed_args;
};

// Feeds the encoded `reply` all at once, and again id by id.
Parsed Parse(const std::string& reply, bool tools) {
  const std::vector<int32_t> ids = GptOss().Encode(reply);
  auto tokens = HarmonyTokens::Of(GptOss());
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  HarmonyOutput whole(&GptOss(), *tokens, tools);
  whole.Feed(ids);
  whole.Finish();
  Parsed p{whole.reasoning(), whole.content(), whole.tool_calls()};
  HarmonyOutput stream(&GptOss(), *tokens, tools);
  auto take = [&](const ChatDelta& d) {
    p.streamed_reasoning += d.reasoning;
    p.streamed_content += d.content;
    for (const ToolCallDelta& c : d.tool_calls) p.streamed_args += c.arguments;
  };
  for (int32_t id : ids) take(stream.Feed({id}));
  take(stream.Finish());
  EXPECT_EQ(p.streamed_reasoning, p.reasoning) << reply;
  EXPECT_EQ(p.streamed_content, p.content) << reply;
  return p;
}

TEST(HarmonyOutputTest, AnalysisIsReasoningAndFinalIsContent) {
  const Parsed p = Parse(
      "<|channel|>analysis<|message|>User asks 2+2. Simple: 4.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
      false);
  EXPECT_EQ(p.reasoning, "User asks 2+2. Simple: 4.");
  EXPECT_EQ(p.content, "2 + 2 = 4.");
  EXPECT_TRUE(p.calls.empty());
}

TEST(HarmonyOutputTest, CommentaryToAFunctionIsAToolCall) {
  const std::string args = "{\"location\":\"Paris, France\",\"unit\":\"c\"}";
  for (const char* header :
       {"<|channel|>commentary to=functions.get_weather <|constrain|>json",
        " to=functions.get_weather<|channel|>commentary <|constrain|>json"}) {
    SCOPED_TRACE(header);
    const Parsed p =
        Parse(std::string("<|channel|>analysis<|message|>Need weather.<|end|>"
                          "<|start|>assistant") +
                  header + "<|message|>" + args + "<|call|>",
              true);
    EXPECT_EQ(p.reasoning, "Need weather.");
    EXPECT_EQ(p.content, "");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, args);
    EXPECT_EQ(p.calls[0].id.rfind("call_", 0), 0u);
    EXPECT_EQ(p.streamed_args, args);
  }
}

TEST(HarmonyOutputTest, WithoutToolsACallIsLeftAsContent) {
  const Parsed p = Parse(
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
      "{\"a\":1}<|call|>",
      false);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "{\"a\":1}");
}

TEST(HarmonyOutputTest, AReplyCutShortKeepsWhatCame) {
  // max_tokens ran out inside the final message: no closing token.
  const Parsed p = Parse(
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant"
      "<|channel|>final<|message|>Partial answer — ünïcödé",
      false);
  EXPECT_EQ(p.reasoning, "Think.");
  EXPECT_EQ(p.content, "Partial answer — ünïcödé");
}

// The serve routes' ChatOutput reads harmony from the ids when the format
// is harmony and tool_choice is auto; a forced tool choice is constrained
// JSON text and keeps the text path.
TEST(HarmonyOutputTest, ChatOutputDelegatesUnlessAToolIsForced) {
  const std::string reply =
      "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant"
      "<|channel|>final<|message|>Done.<|return|>";
  const std::vector<int32_t> ids = GptOss().Encode(reply);
  ChatOutputOptions o;
  o.syntax = ToolSyntax::kHarmony;
  o.harmony = &GptOss();
  ChatOutput out(o);
  out.Feed("decoded text is not read", ids);
  out.Finish();
  EXPECT_EQ(out.reasoning(), "Hmm.");
  EXPECT_EQ(out.content(), "Done.");
  o.forced = ToolChoice::kRequired;
  ChatOutput forced(o);
  forced.Feed("{\"name\": \"f\", \"arguments\": {}}", ids);
  forced.Finish();
  ASSERT_EQ(forced.tool_calls().size(), 1u);
  EXPECT_EQ(forced.tool_calls()[0].name, "f");
}

}  // namespace
}  // namespace flotilla::coordinator::serve
