// What flotilla-tool synth writes: every tensor of a K3 checkpoint (names,
// dtypes, shapes as in docs/k3-architecture.md section 2), how its random
// values are distributed, and which shard holds it. The layout follows the real
// release: one shard per layer (trunk, then its experts, each expert's six
// tensors back to back), then a final shard with the embedding, lm_head and
// model-level vectors.
#ifndef FLOTILLA_TOOLS_SYNTH_PLAN_H_
#define FLOTILLA_TOOLS_SYNTH_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::tools {

// How a tensor's values are drawn.
enum class SynthInit {
  kUniform,      // center + uniform(-half_width, half_width); BF16 or F32
  kALog,         // log(uniform(1, 16)) for the first `used` entries, 0 after
  kMxfp4Packed,  // uniformly random E2M1 nibbles
  kMxfp4Scale,   // E8M0 exponents scale_base + {-1, 0, 0, +1}
};

struct SynthTensor {
  std::string name;
  model::DType dtype = model::DType::kF32;
  std::vector<int64_t> shape;
  SynthInit init = SynthInit::kUniform;
  float center = 0;
  float half_width = 0;
  int scale_base = 127;  // kMxfp4Scale
  int64_t used = 0;      // kALog

  uint64_t nbytes() const;
};

struct SynthShard {
  std::string file;  // model-0000i-of-0000N.safetensors
  std::vector<SynthTensor> tensors;
};

// The checkpoint for `config` in `shards` files: 0 means one per layer plus
// the final one (the real layout); N in 1..layers+1 merges consecutive layers
// (balancing bytes), the model-level tensors always in the last file.
absl::StatusOr<std::vector<SynthShard>> PlanSynthCheckpoint(
    const model::K3Config& config, int shards);

// The E8M0 exponent that gives dequantised MXFP4 weights of standard
// deviation ~1/sqrt(fan_in) with uniformly random nibbles (E[e2m1^2] =
// 8.5625) and the scale jitter of kMxfp4Scale.
int Mxfp4ScaleBase(int64_t fan_in);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_SYNTH_PLAN_H_
