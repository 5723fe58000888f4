// Request parsing details a client relies on: a request without a seed
// samples from a fresh random stream, one with a seed repeats its own.
#include "coordinator/serve/completion_request.h"

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

}  // namespace
}  // namespace flotilla::coordinator::serve
