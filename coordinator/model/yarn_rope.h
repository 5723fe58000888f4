// YaRN-scaled rotary embeddings as Hugging Face computes them for
// DeepSeek-V3 / Kimi K2 and gpt-oss (_compute_yarn_parameters), in float32: the
// per-pair inverse frequencies blend interpolated (theta / f) and
// extrapolated (theta) frequencies over a linear ramp between the
// correction dimensions of beta_fast and beta_slow, and cos/sin are
// multiplied by an attention factor.
#ifndef FLOTILLA_COORDINATOR_MODEL_YARN_ROPE_H_
#define FLOTILLA_COORDINATOR_MODEL_YARN_ROPE_H_

#include <vector>

namespace flotilla::coordinator {

struct YarnParams {
  int dim = 0;  // rotated dimensions (qk_rope_head_dim), even
  double theta = 10000;
  // f: max_position_embeddings / original_max_position_embeddings (what
  // upstream uses, not rope_scaling.factor; the releases have them equal).
  double factor = 1;
  int original_max_position = 0;
  double beta_fast = 32, beta_slow = 1;
  double mscale = 1, mscale_all_dim = 0;
  // Whether the correction range is widened to whole dimensions (floor the
  // low end, ceil the high end): upstream's default; gpt-oss sets
  // rope_scaling.truncate false and keeps the fractional range.
  bool truncate = true;
};

// dim / 2 inverse frequencies, float32 as upstream computes them.
std::vector<float> YarnInvFreq(const YarnParams& p);

// The factor on cos and sin: get_mscale(f, mscale) / get_mscale(f,
// mscale_all_dim), get_mscale(f, m) = 0.1 m ln f + 1 (1 when f <= 1).
float YarnAttentionFactor(const YarnParams& p);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_YARN_ROPE_H_
