// Token sampling from a logits row: greedy (temperature 0) or seeded random
// sampling with temperature, top-k, min-p and top-p, after optional
// presence / frequency / repetition penalties and logit biases.
// Deterministic for a given seed.
#ifndef FLOTILLA_COORDINATOR_SAMPLER_H_
#define FLOTILLA_COORDINATOR_SAMPLER_H_

#include <cstdint>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace flotilla::coordinator {

struct SamplerOptions {
  float temperature = 0.0f;  // 0 = greedy (argmax, first index on ties)
  int top_k = 0;             // 0 = no top-k cut
  float top_p = 1.0f;        // 1 = no nucleus cut; must be in (0, 1]
  // Tokens whose probability is below min_p times the top token's are cut
  // (0 = no cut; in [0, 1]).
  float min_p = 0.0f;
  uint64_t seed = 0;  // seed of the random stream

  // Logit adjustments, made before everything above (greedy included), in
  // this order. OpenAI's: each token already generated loses
  // presence_penalty once and frequency_penalty per time it was generated
  // (both in [-2, 2]). Hugging Face's / vLLM's: each token of the prompt or
  // the output so far has its logit divided by repetition_penalty when
  // positive, multiplied when negative (> 0; 1 = none). Then logit_bias
  // (token id, added value in [-100, 100]).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Whether any adjustment above is asked for.
  bool Adjusts() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f ||
           repetition_penalty != 1.0f || !logit_bias.empty();
  }
};

// InvalidArgument naming the bad field (negative temperature, top_p outside
// (0,1], min_p outside [0,1], negative top_k, penalties out of range,
// non-finite values). logit_bias ids are checked against the vocabulary by
// the caller, who knows it.
absl::Status ValidateSamplerOptions(const SamplerOptions& options);

class Sampler {
 public:
  // `prompt`: what repetition_penalty counts besides the generated tokens.
  explicit Sampler(const SamplerOptions& options,
                   const std::vector<int32_t>& prompt = {});

  // Picks a token id from logits[0..vocab). Non-finite logits are never
  // chosen unless all are non-finite (then index 0).
  int32_t Sample(const float* logits, int vocab);
  // Records the token the sequence took (what the penalties count).
  void Accept(int32_t id);

 private:
  // `logits` with the penalties and biases applied, in adjusted_.
  const float* Adjust(const float* logits, int vocab);

  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int> generated_;  // id -> times generated
  std::unordered_set<int32_t> seen_;            // prompt and generated ids
  std::vector<float> adjusted_;
};

// Argmax with ties to the lowest index.
int32_t Argmax(const float* logits, int vocab);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_SAMPLER_H_
