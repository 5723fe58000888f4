// Request details a client relies on: a request without a seed samples
// from a fresh random stream, one with a seed repeats its own; a request
// without max_tokens is cut to the context its prompt leaves, one with
// max_tokens is refused when they do not fit; the fields clients send are
// used or refused, never ignored.
#include "coordinator/serve/completion_request.h"

#include <string>
#include <vector>

#include "coordinator/serve/completion_job.h"
#include "gtest/gtest.h"

namespace flotilla::coordinator::serve {
namespace {

TEST(CompletionRequestTest, NoSeedIsAFreshRandomStream) {
  const RequestLimits limits;
  const char* kNoSeed = R"({"prompt": "hi", "temperature": 1})";
  const char* kNullSeed = R"({"prompt": "hi", "temperature": 1, "seed": null})";
  auto a = ParseCompletionRequest(kNoSeed, /*chat=*/false, limits);
  auto b = ParseCompletionRequest(kNoSeed, /*chat=*/false, limits);
  auto c = ParseCompletionRequest(kNullSeed, /*chat=*/false, limits);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // 64 random bits each: equal by chance once in 2^64.
  EXPECT_NE(a->sampler.seed, b->sampler.seed);
  EXPECT_NE(a->sampler.seed, c->sampler.seed);
  for (const char* body :
       {R"({"prompt": "hi", "seed": 7})", R"({"prompt": "hi", "seed": 0})"}) {
    auto seeded = ParseCompletionRequest(body, /*chat=*/false, limits);
    ASSERT_TRUE(seeded.ok()) << seeded.status();
    auto again = ParseCompletionRequest(body, /*chat=*/false, limits);
    EXPECT_EQ(seeded->sampler.seed, again->sampler.seed) << body;
  }
  auto seven = ParseCompletionRequest(R"({"prompt": "hi", "seed": 7})",
                                      /*chat=*/false, limits);
  EXPECT_EQ(seven->sampler.seed, 7u);
}

TEST(CompletionRequestTest, NoMaxTokensIsCutToTheContextLeft) {
  RequestLimits limits;
  limits.max_context = 512;
  limits.default_max_tokens = 256;
  auto parsed =
      ParseCompletionRequest(R"({"prompt": "hi"})", /*chat=*/false, limits);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->max_tokens_given);
  EXPECT_EQ(parsed->max_tokens, 256);
  auto given = ParseCompletionRequest(R"({"prompt": "hi", "max_tokens": 300})",
                                      /*chat=*/false, limits);
  ASSERT_TRUE(given.ok());
  EXPECT_TRUE(given->max_tokens_given);

  // A 432-token prompt (the web chat's third turn) and the default 256.
  CompletionSpec spec;
  spec.prompt.assign(432, 5);
  spec.max_tokens = 256;
  spec.max_tokens_given = false;
  FitDefaultMaxTokens(&spec, limits);
  EXPECT_EQ(spec.max_tokens, 512 - 432);
  EXPECT_TRUE(CheckCompletionSpec(spec, 100, limits).ok());
  // Short prompts keep the default.
  spec.prompt.assign(10, 5);
  spec.max_tokens = 256;
  FitDefaultMaxTokens(&spec, limits);
  EXPECT_EQ(spec.max_tokens, 256);

  // max_tokens the client named is a cap too: cut to the context left.
  spec.prompt.assign(432, 5);
  spec.max_tokens = 32000;
  spec.max_tokens_given = true;
  FitDefaultMaxTokens(&spec, limits);
  EXPECT_EQ(spec.max_tokens, 512 - 432);
  EXPECT_TRUE(CheckCompletionSpec(spec, 100, limits).ok());
  // Uncut, the spec is refused naming the context.
  spec.max_tokens = 256;
  absl::Status s = CheckCompletionSpec(spec, 100, limits);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exceed the context"), std::string::npos) << s;

  // A prompt that fills the context leaves no room at all.
  spec.prompt.assign(512, 5);
  spec.max_tokens = 256;
  spec.max_tokens_given = false;
  FitDefaultMaxTokens(&spec, limits);
  s = CheckCompletionSpec(spec, 100, limits);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fills the context of 512 tokens; shorten the "
                             "prompt or raise --max-context"),
            std::string::npos)
      << s;
}

// What OpenAI-SDK frameworks send: content as text parts, null content on
// an assistant turn that called tools; the sampling fields llama-server and
// vLLM take; and refusals, naming the field, for what is not implemented.
// Issue 44 item 5: a NUL ends nlohmann's input, so what followed it was
// ignored; a byte-order mark after the JSON is junk too.
TEST(CompletionRequestTest, BytesAfterTheJsonAreRefused) {
  RequestLimits limits;
  const std::string nul("{\"prompt\": \"hi\"}\0junk", 21);
  auto r = ParseCompletionRequest(nul, /*chat=*/false, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a NUL byte at offset 16"),
            absl::string_view::npos)
      << r.status();
  r = ParseCompletionRequest("{\"prompt\": \"hi\"}\xEF\xBB\xBF",
                             /*chat=*/false, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not valid JSON"),
            absl::string_view::npos)
      << r.status();
}

TEST(CompletionRequestTest, ClientFieldsAreUsedOrRefused) {
  const RequestLimits limits;
  auto parts = ParseCompletionRequest(
      R"({"messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be "},
                                           {"type": "text", "text": "brief."}]},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": null},
            {"role": "user", "content": [{"type": "text", "text": "Bye"}],
             "name": "ann"}]})",
      /*chat=*/true, limits);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->messages.size(), 4u);
  EXPECT_EQ(parts->messages[0].content, "Be brief.");
  EXPECT_EQ(parts->messages[2].content, "");
  EXPECT_EQ(parts->messages[3].content, "Bye");

  auto sampling = ParseCompletionRequest(
      R"({"prompt": "hi", "min_p": 0.05, "presence_penalty": 0.5,
          "frequency_penalty": -0.25, "repetition_penalty": 1.1,
          "logit_bias": {"7": -100, "12": 2.5}, "ignore_eos": true,
          "response_format": {"type": "text"}, "user": "u-1"})",
      /*chat=*/false, limits);
  ASSERT_TRUE(sampling.ok()) << sampling.status();
  EXPECT_FLOAT_EQ(sampling->sampler.min_p, 0.05f);
  EXPECT_FLOAT_EQ(sampling->sampler.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(sampling->sampler.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(sampling->sampler.repetition_penalty, 1.1f);
  ASSERT_EQ(sampling->sampler.logit_bias.size(), 2u);
  EXPECT_TRUE(sampling->ignore_eos);

  struct Refused {
    bool chat;
    const char* body;
    const char* names;
  };
  for (
      const Refused& r : std::vector<Refused>{
          {false, R"({"prompt": "hi", "response_format": {"type": "xml"}})",
           "response_format type 'xml'"},
          {false, R"({"prompt": "hi", "tools": []})",
           "tools belongs to /v1/chat/completions"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
           "tool_choice requires tools"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function"}]})",
           "tools[0] must be"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "a b"}}]})",
           "tools[0].function.name"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": {"type": "function", "function": {"name": "g"}}})",
           "tool_choice names 'g'"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_schema", "json_schema":
                  {"name": "n", "schema": {"type": "object", "properties":
                    {"d": {"type": "string", "pattern": "^a"}}}}}})",
           "response_format.json_schema.schema: #/properties/d/pattern"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "chat_template_kwargs": {"messages": []}})",
           "chat_template_kwargs.messages is set by the server"},
          {true, R"({"messages": [{"role": "tool", "content": "x"}]})",
           "messages[0].tool_call_id is required"},
          {false, R"({"prompt": "hi", "presence_penalty": 3})",
           "presence_penalty"},
          {false, R"({"prompt": "hi", "repetition_penalty": 0})",
           "repetition_penalty"},
          {false, R"({"prompt": "hi", "min_p": -0.1})", "min_p"},
          {false, R"({"prompt": "hi", "logit_bias": {"x": 1}})",
           "logit_bias: key 'x'"},
          {false, R"({"prompt": "hi", "logit_bias": {"3": 200}})",
           "logit_bias"},
          {false, R"({"prompt": "hi", "ignore_eos": 1})", "ignore_eos"},
          // Issue 44 item 5.
          {false, R"({"prompt": "hi", "stop": 0})",
           "stop must be a string or a list of strings"},
          {false, R"({"prompt": "hi", "stop": ["a", 7]})",
           "stop[1] must be a string"},
          {false, R"({"prompt": "hi", "logprobs": false})",
           "logprobs on /v1/completions is a number of alternatives 0..20"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "f",
                  "parameters": {"type": "integer", "enum": ["a"]}}}],
                "tool_choice": "required"})",
           "tools: tools[0].function.parameters: no value satisfies this "
           "schema"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}],
                "response_format": {"type": "json_schema", "json_schema":
                  {"name": "n", "schema": {"type": []}}}})",
           "response_format.json_schema.schema: #: no value satisfies this "
           "schema ('type' lists no type)"},
          {false, R"({"prompt": "hi", "mirostat": 2})",
           "unknown field 'mirostat'"},
          {true,
           R"({"messages": [{"role": "user", "content": "x"}], "prompt": "y"})",
           "prompt belongs to /v1/completions"},
          {true, R"({"messages": [{"role": "user", "content": null}]})",
           "messages[0].content may be null only"},
          {true,
           R"({"messages": [{"role": "user", "content":
                [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
           "messages[0].content[0].type 'image_url'"},
          {true,
           R"({"messages": [{"role": "user", "content": "x",
                              "tool_calls": []}]})",
           "messages[0].tool_calls"},
      }) {
    auto got = ParseCompletionRequest(r.body, r.chat, limits);
    ASSERT_FALSE(got.ok()) << r.body;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find(r.names), absl::string_view::npos)
        << got.status() << " for " << r.body;
  }
}

}  // namespace
}  // namespace flotilla::coordinator::serve
