// The numeric checks every test leans on must fail on NaN: a NaN logit or
// activation is the most likely symptom of a broken kernel or weight.
#include "shared/testing/fixture.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace flotilla::testutil {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(FixtureChecksTest, MaxRelativeErrorOfEqualAndCloseVectors) {
  const std::vector<float> want = {1.0f, -2.0f, 4.0f};
  const std::vector<float> got = {1.0f, -2.0f, 4.5f};
  EXPECT_EQ(MaxRelativeError(want.data(), want.data(), want.size()), 0.0);
  EXPECT_DOUBLE_EQ(MaxRelativeError(got.data(), want.data(), want.size()),
                   0.5 / 4.0);
}

TEST(FixtureChecksTest, NaNOnEitherSideIsAnInfiniteError) {
  const std::vector<float> want = {1.0f, 2.0f, 3.0f};
  std::vector<float> got = want;
  got[1] = kNaN;
  EXPECT_TRUE(std::isinf(MaxRelativeError(got.data(), want.data(), 3)));
  EXPECT_TRUE(std::isinf(MaxRelativeError(want.data(), got.data(), 3)));
  EXPECT_TRUE(std::isinf(MaxAbsDiff(got, want)));
  EXPECT_TRUE(std::isinf(MaxAbsDiff(want, got)));
  EXPECT_FALSE(AllClose(got, want, 1e30, 1e30));
}

TEST(FixtureChecksTest, MaxAbsDiff) {
  EXPECT_EQ(MaxAbsDiff({1.0f, 2.0f}, {1.0f, 2.0f}), 0.0);
  EXPECT_DOUBLE_EQ(MaxAbsDiff({1.0f, 2.0f}, {1.25f, 1.0f}), 1.0);
  EXPECT_TRUE(std::isinf(MaxAbsDiff({1.0f}, {1.0f, 2.0f})));
}

}  // namespace
}  // namespace flotilla::testutil
