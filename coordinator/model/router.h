// The router block every MoE family shares, as a small spec instead of a
// mode of one family's config: how a token's router logits choose its
// routed experts and weigh them. Kimi K3 (and DeepSeek-V3's scoring):
// sigmoid scores, chosen by score + a per-expert correction bias, weighed
// by the unbiased scores renormalised and scaled. Mixtral (and Qwen3-MoE):
// softmax over all experts, the top k renormalised. gpt-oss: the top k
// logits, softmaxed among themselves.
//
// Each scoring keeps the arithmetic of its reference implementation, so the
// families' outputs are bitwise what they were: sigmoid scores in double
// (the Kimi K3 reference), softmax in float (Hugging Face's float32).
#ifndef FLOTILLA_COORDINATOR_MODEL_ROUTER_H_
#define FLOTILLA_COORDINATOR_MODEL_ROUTER_H_

#include <cstddef>
#include <vector>

#include "coordinator/model/expert_backend.h"

namespace flotilla::coordinator {

struct RouterSpec {
  // kTopKSoftmax (gpt-oss): the top k logits, then a softmax over just
  // them; `bias` is not taken (it is part of gpt-oss's logits: add it
  // first) and `renormalize` does not apply (the k weights sum to 1).
  enum class Scoring { kSoftmax, kSigmoid, kTopKSoftmax };
  Scoring scoring = Scoring::kSoftmax;
  int num_experts = 0;
  int top_k = 0;
  // The chosen experts' weights are divided by their sum (+ this epsilon).
  bool renormalize = true;
  double renormalize_epsilon = 0;
  float scaling = 1;  // then multiplied by this
  // Group-limited choice (DeepSeek-V3 / Kimi K2, sigmoid scoring only): the
  // experts form num_groups contiguous groups; a group scores the sum of
  // its two best biased scores; the top_groups best groups stay and every
  // other expert's biased score becomes 0.0 (not -inf, as upstream), then
  // the top k are chosen. num_groups <= 1: no group stage.
  int num_groups = 1;
  int top_groups = 1;
};

// Routes `rows` tokens from their router logits [rows][num_experts]
// (`bias` [num_experts] or null: added to the scores for the choice only),
// appending top_k tasks per row, in row order and, within a row, highest
// (biased) score first; a tie goes to the lower expert index.
void Route(const RouterSpec& spec, const float* logits, const float* bias,
           size_t rows, std::vector<ExpertTask>* tasks);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_ROUTER_H_
