// Request details a client relies on: a request without a seed samples
// from a fresh random stream, one with a seed repeats its own; a request
// without max_tokens is cut to the context its prompt leaves, one with
// max_tokens is refused when they do not fit.
#include "coordinator/serve/completion_request.h"

#include <string>

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

  // max_tokens the client named is never cut: refused when it does not fit.
  spec.prompt.assign(432, 5);
  spec.max_tokens = 256;
  spec.max_tokens_given = true;
  FitDefaultMaxTokens(&spec, limits);
  EXPECT_EQ(spec.max_tokens, 256);
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
  EXPECT_NE(s.message().find("fills the context"), std::string::npos) << s;
}

}  // namespace
}  // namespace flotilla::coordinator::serve
