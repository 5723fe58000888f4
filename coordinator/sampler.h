// Token sampling from a logits row: greedy (temperature 0) or seeded random
// sampling with temperature, top-k and top-p. Deterministic for a given seed.
#ifndef FLOTILLA_COORDINATOR_SAMPLER_H_
#define FLOTILLA_COORDINATOR_SAMPLER_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"

namespace flotilla::coordinator {

struct SamplerOptions {
  float temperature = 0.0f;  // 0 = greedy (argmax, first index on ties)
  int top_k = 0;             // 0 = no top-k cut
  float top_p = 1.0f;        // 1 = no nucleus cut; must be in (0, 1]
  uint64_t seed = 0;         // seed of the random stream
};

// InvalidArgument naming the bad field (negative temperature, top_p outside
// (0,1], negative top_k, non-finite values).
absl::Status ValidateSamplerOptions(const SamplerOptions& options);

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);

  // Picks a token id from logits[0..vocab). Non-finite logits are never
  // chosen unless all are non-finite (then index 0).
  int32_t Sample(const float* logits, int vocab);

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
};

// Argmax with ties to the lowest index.
int32_t Argmax(const float* logits, int vocab);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_SAMPLER_H_
