// The shared router block on hand-worked rows: softmax (Mixtral, Qwen3-MoE)
// and sigmoid with a correction bias (Kimi K3, DeepSeek-V3): which experts,
// in which order, with which weights; ties go to the lower index.
#include "coordinator/model/router.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace flotilla::coordinator {
namespace {

TEST(RouterTest, SoftmaxTopKRenormalised) {
  RouterSpec spec;
  spec.num_experts = 4;
  spec.top_k = 2;
  // Row 0: expert 2 then 0. Row 1: a tie between 1 and 3 goes to 1.
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f,
                                     0.0f, 3.0f, 0.0f, 3.0f};
  std::vector<ExpertTask> tasks;
  Route(spec, logits.data(), nullptr, 2, &tasks);
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks[0].row, 0);
  EXPECT_EQ(tasks[0].expert, 2);
  EXPECT_EQ(tasks[1].expert, 0);
  // Renormalised over the two: e^2 / (e^2 + e^1).
  EXPECT_NEAR(tasks[0].weight, std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)),
              1e-6);
  EXPECT_NEAR(tasks[0].weight + tasks[1].weight, 1.0f, 1e-6);
  EXPECT_EQ(tasks[2].row, 1);
  EXPECT_EQ(tasks[2].expert, 1);
  EXPECT_EQ(tasks[3].expert, 3);
  EXPECT_FLOAT_EQ(tasks[2].weight, 0.5f);

  // Without renormalisation the weights are the softmax probabilities.
  spec.renormalize = false;
  tasks.clear();
  Route(spec, logits.data(), nullptr, 1, &tasks);
  const double z = std::exp(1.0) + 1 + std::exp(2.0) + std::exp(-1.0);
  EXPECT_NEAR(tasks[0].weight, std::exp(2.0) / z, 1e-6);
}

TEST(RouterTest, SigmoidChoosesByBiasAndWeighsWithoutIt) {
  RouterSpec spec;
  spec.scoring = RouterSpec::Scoring::kSigmoid;
  spec.num_experts = 3;
  spec.top_k = 2;
  spec.renormalize_epsilon = 1e-20;
  spec.scaling = 2.5f;
  const std::vector<float> logits = {2.0f, 0.0f, 1.0f};
  // The bias lifts expert 1 above the others for the choice only; its
  // weight comes from its unbiased score.
  const std::vector<float> bias = {0.0f, 0.5f, 0.0f};
  std::vector<ExpertTask> tasks;
  Route(spec, logits.data(), bias.data(), 1, &tasks);
  ASSERT_EQ(tasks.size(), 2u);
  // Biased scores: 0.881, 0.5 + 0.5 = 1.0, 0.731: expert 1, then 0.
  EXPECT_EQ(tasks[0].expert, 1);
  EXPECT_EQ(tasks[1].expert, 0);
  const double s0 = 1 / (1 + std::exp(-2.0)), s1 = 0.5;
  EXPECT_NEAR(tasks[0].weight, 2.5 * s1 / (s0 + s1), 1e-6);
  EXPECT_NEAR(tasks[1].weight, 2.5 * s0 / (s0 + s1), 1e-6);
}

TEST(RouterTest, GroupLimitedChoiceKeepsTheBestPairsOfGroups) {
  RouterSpec spec;
  spec.scoring = RouterSpec::Scoring::kSigmoid;
  spec.num_experts = 8;
  spec.top_k = 2;
  spec.num_groups = 4;  // {0,1} {2,3} {4,5} {6,7}
  spec.top_groups = 2;
  spec.renormalize = true;
  spec.renormalize_epsilon = 1e-20;
  spec.scaling = 2.5f;
  // Expert 0 scores highest alone, but its group's pair sum is the lowest:
  // groups {2,3} and {6,7} are kept and the choice is made inside them.
  const auto logit = [](double s) {
    return static_cast<float>(std::log(s / (1 - s)));
  };
  const std::vector<float> logits = {logit(0.95), logit(0.05), logit(0.70),
                                     logit(0.65), logit(0.40), logit(0.45),
                                     logit(0.60), logit(0.60)};
  std::vector<ExpertTask> tasks;
  Route(spec, logits.data(), nullptr, 1, &tasks);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].expert, 2);
  EXPECT_EQ(tasks[1].expert, 3);
  // Weighed by the unbiased scores, renormalised, then scaled.
  EXPECT_NEAR(tasks[0].weight, 2.5 * 0.70 / (0.70 + 0.65), 1e-6);

  // Experts outside the kept groups score 0.0, as upstream (not -inf): with
  // every kept score biased below zero, a dropped group's expert wins.
  const std::vector<float> bias = {0, 0, -1, -1, 0, 0, -1, -1};
  spec.top_groups = 1;
  tasks.clear();
  Route(spec, logits.data(), bias.data(), 1, &tasks);
  // Group sums: {0,1} 1.0, {2,3} -0.65, {4,5} 0.85, {6,7} -0.8: {0,1} kept,
  // so 0 and 1 are chosen by their own scores.
  EXPECT_EQ(tasks[0].expert, 0);
  EXPECT_EQ(tasks[1].expert, 1);
  const std::vector<float> low = {-1, -1, -1, -1, -1, -1, -1, -1};
  tasks.clear();
  Route(spec, logits.data(), low.data(), 1, &tasks);
  // Group sums: {0,1} -1.0, {2,3} -0.65, {4,5} -1.15, {6,7} -0.8: {2,3} is
  // kept, at -0.30 and -0.35; the 0.0 of the dropped experts is higher, so
  // the lowest-indexed dropped ones (0, 1) are chosen.
  EXPECT_EQ(tasks[0].expert, 0);
  EXPECT_EQ(tasks[1].expert, 1);
}

// gpt-oss: the top k logits softmaxed among themselves. Without
// renormalisation, softmax-then-top-k (Qwen3 with norm_topk_prob false)
// gives other weights; with it, the same (the normaliser cancels).
TEST(RouterTest, TopKSoftmaxWeighsOnlyTheChosenLogits) {
  RouterSpec spec;
  spec.scoring = RouterSpec::Scoring::kTopKSoftmax;
  spec.num_experts = 4;
  spec.top_k = 2;
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
  std::vector<ExpertTask> tasks;
  Route(spec, logits.data(), nullptr, 1, &tasks);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].expert, 1);
  EXPECT_EQ(tasks[1].expert, 3);
  const double w1 = 1.0 / (1.0 + std::exp(1.5 - 2.0));
  EXPECT_NEAR(tasks[0].weight, w1, 1e-6);
  EXPECT_NEAR(tasks[1].weight, 1 - w1, 1e-6);
  RouterSpec plain;
  plain.num_experts = 4;
  plain.top_k = 2;
  plain.renormalize = false;
  std::vector<ExpertTask> softmax_all;
  Route(plain, logits.data(), nullptr, 1, &softmax_all);
  EXPECT_LT(softmax_all[0].weight, tasks[0].weight - 0.05f);
}

}  // namespace
}  // namespace flotilla::coordinator
