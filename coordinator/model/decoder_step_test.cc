// LayOutStep's row layout and CheckFinite's error, which every family's
// forward pass uses to stop a broken step naming where it broke.
#include "coordinator/model/decoder_step.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LayOutStepTest, SequencesFollowEachOtherWithTheirOwnPositions) {
  const std::vector<int32_t> a = {5, 6, 7}, b = {8}, c = {9, 10};
  const StepRows step = LayOutStep({0, 4, 11}, {&a, &b, &c});
  EXPECT_THAT(step.offset, ElementsAre(0, 3, 4, 6));
  EXPECT_THAT(step.position, ElementsAre(0, 1, 2, 4, 11, 12));
  EXPECT_EQ(step.size(), 6u);
}

TEST(CheckFiniteTest, FiniteRowsPass) {
  const std::vector<int32_t> a = {1, 2};
  const StepRows step = LayOutStep({3}, {&a});
  EXPECT_TRUE(
      CheckFinite({1.0f, -2.0f, 0.0f, 1e30f}, 2, "x", step, nullptr).ok());
}

TEST(CheckFiniteTest, NamesWhatPositionAndElementOfTheFirstBadValue) {
  const std::vector<int32_t> a = {1}, b = {2, 3};
  const StepRows step = LayOutStep({7, 20}, {&a, &b});
  std::vector<float> x(3 * 4, 0.5f);
  x[2 * 4 + 1] = std::numeric_limits<float>::infinity();   // row 2, element 1
  x[2 * 4 + 3] = std::numeric_limits<float>::quiet_NaN();  // a later one
  const absl::Status s =
      CheckFinite(x, 4, "activation after layer 5", step, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  // Row 2 is sequence b's second token: position 21.
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("non-finite activation after layer 5 (inf) at "
                        "position 21, element 1"));
}

TEST(CheckFiniteTest, OutputRowsMapBackToTheirStepRows) {
  const std::vector<int32_t> a = {1, 2}, b = {3};
  const StepRows step = LayOutStep({10, 30}, {&a, &b});
  // Logits for step rows 1 and 2 (each sequence's last token); the second
  // has a NaN at element 0.
  const std::vector<float> logits = {
      0.0f, 1.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  const std::vector<size_t> rows = {1, 2};
  const absl::Status s = CheckFinite(logits, 2, "logit", step, &rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("non-finite logit (nan) at position 30, element 0"));
}

}  // namespace
}  // namespace flotilla::coordinator
