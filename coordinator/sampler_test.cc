#include "coordinator/sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits whose softmax at temperature 1 is exactly proportional to `probs`.
std::vector<float> LogitsFor(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<int32_t> Draw(Sampler& sampler, const std::vector<float>& logits,
                          int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(
        sampler.Sample(logits.data(), static_cast<int>(logits.size())));
  }
  return ids;
}

// Pearson chi-square of observed counts against expected probabilities.
// Expected probabilities of zero must have zero counts (checked by caller).
double ChiSquare(const std::vector<int>& counts,
                 const std::vector<double>& expected, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) continue;
    const double e = expected[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::vector<int> Histogram(Sampler& sampler, const std::vector<float>& logits,
                           int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int32_t id : Draw(sampler, logits, n)) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, static_cast<int32_t>(logits.size()));
    ++counts[id];
  }
  return counts;
}

TEST(ArgmaxTest, TiesPickTheFirstIndex) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  EXPECT_EQ(Argmax(logits.data(), 5), 1);
}

TEST(ArgmaxTest, SkipsNonFiniteAndFallsBackToZero) {
  const std::vector<float> logits = {kNaN, -3.0f, kInf, -2.0f, -kInf};
  EXPECT_EQ(Argmax(logits.data(), 5), 3);
  const std::vector<float> all_bad = {kNaN, kInf, -kInf};
  EXPECT_EQ(Argmax(all_bad.data(), 3), 0);
}

TEST(SamplerTest, GreedyIsArgmaxWithFirstIndexOnTies) {
  Sampler sampler(SamplerOptions{});  // temperature 0
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sampler.Sample(logits.data(), 4), 1);
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDiffers) {
  const std::vector<float> logits = LogitsFor({0.3, 0.3, 0.2, 0.1, 0.1});
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 1234;
  Sampler a(options);
  Sampler b(options);
  const std::vector<int32_t> first = Draw(a, logits, 200);
  EXPECT_EQ(first, Draw(b, logits, 200));
  options.seed = 1235;
  Sampler c(options);
  // 200 draws from a 5-way distribution coinciding by chance is impossible
  // in practice; equality would mean the seed is ignored.
  EXPECT_NE(first, Draw(c, logits, 200));
}

TEST(SamplerTest, FixedSeedGivesFixedTokens) {
  // Pins the exact stream: mt19937_64 is fully specified by the standard and
  // the draw conversion is ours, so these ids hold on every platform. They
  // were cross-checked with an independent Python mt19937_64 + inverse-CDF
  // walk. A change here changes every seeded generation users have seen.
  const std::vector<float> logits = LogitsFor({0.4, 0.3, 0.2, 0.1});
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 42;
  Sampler sampler(options);
  const std::vector<int32_t> expected = {2, 1, 2, 0, 3, 0, 1, 0,
                                         0, 0, 0, 1, 1, 1, 2, 3};
  EXPECT_EQ(Draw(sampler, logits, 16), expected);
}

TEST(SamplerTest, TopKOneIsGreedy) {
  const std::vector<float> logits = {0.1f, 0.7f, 0.7f, 0.69f, -2.0f};
  SamplerOptions options;
  options.temperature = 1.5f;
  options.top_k = 1;
  options.seed = 7;
  Sampler sampler(options);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sampler.Sample(logits.data(), 5), 1);
}

TEST(SamplerTest, TinyTopPIsGreedy) {
  const std::vector<float> logits = {0.2f, 1.0f, 0.9f, 1.0f, 0.95f};
  SamplerOptions options;
  options.temperature = 1.0f;
  options.top_p = 1e-6f;
  options.seed = 99;
  Sampler sampler(options);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sampler.Sample(logits.data(), 5), 1);
}

TEST(SamplerTest, MatchesSoftmaxDistribution) {
  const std::vector<double> probs = {0.5, 0.25, 0.125, 0.0625, 0.0625};
  const std::vector<float> logits = LogitsFor(probs);
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 2024;
  Sampler sampler(options);
  constexpr int kDraws = 8000;
  const std::vector<int> counts = Histogram(sampler, logits, kDraws);
  // 4 degrees of freedom: P(chi2 > 30) is about 5e-6, so a correct sampler
  // passes (the seed is fixed anyway), while e.g. a uniform sampler scores
  // in the thousands and an off-by-one walk in the hundreds.
  EXPECT_LT(ChiSquare(counts, probs, kDraws), 30.0);
}

TEST(SamplerTest, TemperatureFlattens) {
  // softmax(log p / T) is proportional to p^(1/T).
  const std::vector<double> probs = {0.64, 0.16, 0.16, 0.04};
  SamplerOptions options;
  options.temperature = 2.0f;
  options.seed = 5;
  Sampler sampler(options);
  std::vector<double> expected;
  double total = 0.0;
  for (double p : probs) total += std::sqrt(p);
  for (double p : probs) expected.push_back(std::sqrt(p) / total);
  constexpr int kDraws = 8000;
  const std::vector<int> counts = Histogram(sampler, LogitsFor(probs), kDraws);
  EXPECT_LT(ChiSquare(counts, expected, kDraws), 30.0);
}

TEST(SamplerTest, TopKRenormalizesOverTheKBest) {
  const std::vector<double> probs = {0.1, 0.4, 0.2, 0.3};
  SamplerOptions options;
  options.temperature = 1.0f;
  options.top_k = 2;
  options.seed = 11;
  Sampler sampler(options);
  constexpr int kDraws = 6000;
  const std::vector<int> counts = Histogram(sampler, LogitsFor(probs), kDraws);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  EXPECT_LT(ChiSquare(counts, {0.0, 4.0 / 7.0, 0.0, 3.0 / 7.0}, kDraws), 30.0);
}

TEST(SamplerTest, TopPKeepsSmallestPrefixReachingP) {
  // Sorted: 0.45 (id 2), 0.3 (id 0), 0.15 (id 3), 0.1 (id 1). top_p 0.7
  // needs the first two (0.75 >= 0.7); the first alone (0.45) is not enough.
  const std::vector<double> probs = {0.3, 0.1, 0.45, 0.15};
  SamplerOptions options;
  options.temperature = 1.0f;
  options.top_p = 0.7f;
  options.seed = 13;
  Sampler sampler(options);
  constexpr int kDraws = 6000;
  const std::vector<int> counts = Histogram(sampler, LogitsFor(probs), kDraws);
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_LT(ChiSquare(counts, {0.3 / 0.75, 0.0, 0.45 / 0.75, 0.0}, kDraws),
            30.0);
}

TEST(SamplerTest, NeverPicksNonFiniteLogits) {
  const std::vector<float> logits = {kNaN, 0.0f, kInf, 0.0f, -kInf, kNaN};
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 3;
  Sampler sampler(options);
  const std::vector<int> counts = Histogram(sampler, logits, 2000);
  EXPECT_EQ(counts[1] + counts[3], 2000);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);

  const std::vector<float> all_bad = {kNaN, kInf, -kInf};
  EXPECT_EQ(sampler.Sample(all_bad.data(), 3), 0);
}

TEST(SamplerTest, DrawsOncePerTokenEvenWithoutCandidates) {
  // The random stream advances by exactly one draw per sampled token, so a
  // sequence's later tokens do not depend on what earlier logits held.
  const std::vector<float> logits = LogitsFor({0.4, 0.3, 0.2, 0.1});
  const std::vector<float> all_bad = {kNaN, kNaN};
  SamplerOptions options;
  options.temperature = 1.0f;
  options.seed = 77;
  Sampler a(options);
  Sampler b(options);
  a.Sample(logits.data(), 4);
  a.Sample(all_bad.data(), 2);
  b.Sample(logits.data(), 4);
  b.Sample(logits.data(), 4);
  EXPECT_EQ(Draw(a, logits, 50), Draw(b, logits, 50));
}

TEST(ValidateSamplerOptionsTest, AcceptsDefaultsAndRanges) {
  EXPECT_TRUE(ValidateSamplerOptions(SamplerOptions{}).ok());
  SamplerOptions options;
  options.temperature = 0.7f;
  options.top_k = 40;
  options.top_p = 1.0f;
  EXPECT_TRUE(ValidateSamplerOptions(options).ok());
  options.top_p = 0.01f;
  EXPECT_TRUE(ValidateSamplerOptions(options).ok());
}

TEST(ValidateSamplerOptionsTest, ErrorsNameTheField) {
  struct Case {
    SamplerOptions options;
    const char* field;
  };
  auto with = [](auto mutate) {
    SamplerOptions o;
    mutate(o);
    return o;
  };
  const std::vector<Case> cases = {
      {with([](SamplerOptions& o) { o.temperature = -0.1f; }), "temperature"},
      {with([](SamplerOptions& o) { o.temperature = kNaN; }), "temperature"},
      {with([](SamplerOptions& o) { o.temperature = kInf; }), "temperature"},
      {with([](SamplerOptions& o) { o.top_k = -1; }), "top_k"},
      {with([](SamplerOptions& o) { o.top_p = 0.0f; }), "top_p"},
      {with([](SamplerOptions& o) { o.top_p = 1.5f; }), "top_p"},
      {with([](SamplerOptions& o) { o.top_p = -0.5f; }), "top_p"},
      {with([](SamplerOptions& o) { o.top_p = kNaN; }), "top_p"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateSamplerOptions(c.options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace flotilla::coordinator
