// The logit adjustments and the min-p cut of the sampler: each changes the
// choice exactly as its definition says, and asks for nothing when unset.
#include <vector>

#include "coordinator/sampler.h"
#include "gtest/gtest.h"

namespace flotilla::coordinator {
namespace {

TEST(SamplerPenaltiesTest, PresenceCountsOnceFrequencyPerTime) {
  // Token 0 leads token 1 by 1.0.
  const std::vector<float> logits = {3.0f, 2.0f, 0.0f};
  SamplerOptions presence;
  presence.presence_penalty = 1.5f;
  Sampler p(presence);
  EXPECT_EQ(p.Sample(logits.data(), 3), 0);  // nothing generated yet
  p.Accept(0);
  EXPECT_EQ(p.Sample(logits.data(), 3), 1);  // 3 - 1.5 < 2

  SamplerOptions frequency;
  frequency.frequency_penalty = 0.6f;
  Sampler f(frequency);
  f.Accept(0);
  EXPECT_EQ(f.Sample(logits.data(), 3), 0);  // 3 - 0.6 > 2
  f.Accept(0);
  EXPECT_EQ(f.Sample(logits.data(), 3), 1);  // 3 - 1.2 < 2

  // A negative penalty favours what was said.
  SamplerOptions again;
  again.presence_penalty = -2.0f;
  Sampler a(again);
  a.Accept(1);
  EXPECT_EQ(a.Sample(logits.data(), 3), 1);
}

TEST(SamplerPenaltiesTest, RepetitionDividesPositiveMultipliesNegative) {
  SamplerOptions o;
  o.repetition_penalty = 2.0f;
  // The prompt holds 0 and 2: 3.0 / 2 = 1.5 < 2.0 (token 1 wins).
  Sampler s(o, /*prompt=*/{0, 2});
  const std::vector<float> logits = {3.0f, 2.0f, -0.5f};
  EXPECT_EQ(s.Sample(logits.data(), 3), 1);
  s.Accept(1);  // now 1 is penalised too: 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(s.Sample(logits.data(), 3), 0);
  // Negative logits move further down: -0.5 * 2 = -1 < -0.8.
  const std::vector<float> negative = {-0.5f, -0.8f};
  Sampler n(o, /*prompt=*/{0});
  EXPECT_EQ(n.Sample(negative.data(), 2), 1);
  // Without the penalty the prompt changes nothing.
  Sampler plain(SamplerOptions(), /*prompt=*/{0, 2});
  EXPECT_EQ(plain.Sample(logits.data(), 3), 0);
}

TEST(SamplerPenaltiesTest, LogitBiasAddsToTheLogit) {
  const std::vector<float> logits = {3.0f, 2.0f, 0.0f};
  SamplerOptions up;
  up.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(Sampler(up).Sample(logits.data(), 3), 2);
  SamplerOptions ban;
  ban.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(Sampler(ban).Sample(logits.data(), 3), 1);
  // The caller's logits are not touched.
  EXPECT_EQ(logits[0], 3.0f);
}

TEST(SamplerPenaltiesTest, MinPCutsBelowAFractionOfTheTopToken) {
  // At temperature 1, p1 / p0 = e^-1 = 0.37 and p2 / p0 = e^-0.1 = 0.90.
  const std::vector<float> logits = {0.0f, -1.0f, -0.1f};
  int seen[3] = {0, 0, 0};
  for (uint64_t seed = 0; seed < 400; ++seed) {
    SamplerOptions o;
    o.temperature = 1.0f;
    o.min_p = 0.5f;
    o.seed = seed;
    ++seen[Sampler(o).Sample(logits.data(), 3)];
  }
  EXPECT_EQ(seen[1], 0);  // cut: 0.37 < 0.5
  EXPECT_GT(seen[0], 100);
  EXPECT_GT(seen[2], 100);
  // Without the cut token 1 is drawn (about 1 in 4).
  int without = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    SamplerOptions o;
    o.temperature = 1.0f;
    o.seed = seed;
    without += Sampler(o).Sample(logits.data(), 3) == 1;
  }
  EXPECT_GT(without, 40);
}

TEST(SamplerPenaltiesTest, OutOfRangeValuesAreRefusedNamingTheField) {
  const auto refused = [](SamplerOptions o, const char* field) {
    const absl::Status s = ValidateSamplerOptions(o);
    EXPECT_FALSE(s.ok()) << field;
    EXPECT_NE(s.message().find(field), absl::string_view::npos) << s;
  };
  SamplerOptions o;
  o.min_p = 1.5f;
  refused(o, "min_p");
  o = SamplerOptions();
  o.presence_penalty = 2.5f;
  refused(o, "presence_penalty");
  o = SamplerOptions();
  o.frequency_penalty = -3.0f;
  refused(o, "frequency_penalty");
  o = SamplerOptions();
  o.repetition_penalty = 0.0f;
  refused(o, "repetition_penalty");
  o = SamplerOptions();
  o.logit_bias = {{1, 101.0f}};
  refused(o, "logit_bias");
  o = SamplerOptions();
  o.logit_bias = {{-1, 1.0f}};
  refused(o, "logit_bias");
  EXPECT_FALSE(SamplerOptions().Adjusts());
}

}  // namespace
}  // namespace flotilla::coordinator
