// config.json of gpt-oss (model_type "gpt_oss", GptOssForCausalLM:
// gpt-oss-20b, gpt-oss-120b): grouped-query attention with q/k/v/o biases,
// one learned sink logit per head, layers alternating sliding-window and
// full attention (layer_types), YaRN RoPE (rope_scaling, truncate false);
// MoE layers of num_local_experts experts behind a biased linear router
// whose top-k logits are softmaxed; experts stored fused and MXFP4-quantised
// (quantization_config), with biases and the clamped SwiGLU (swiglu_limit,
// alpha 1.702). Every constant comes from the file.
#ifndef FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_CONFIG_H_
#define FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::model {

struct GptOssConfig {
  int hidden_size = 0;
  int intermediate_size = 0;  // each expert's width
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 0;
  int num_local_experts = 0;
  int num_experts_per_tok = 0;
  int sliding_window = 0;
  // Per layer: true for "sliding_attention", false for "full_attention".
  std::vector<bool> sliding_layers;
  double rope_theta = 10000;
  // YaRN (rope_scaling): factor, original context, betas, truncation.
  double yarn_factor = 1;
  int yarn_original_max_position = 0;
  double yarn_beta_fast = 32, yarn_beta_slow = 1;
  bool yarn_truncate = true;
  float swiglu_limit = 7;
  bool mxfp4_experts = false;  // quantization_config quant_method mxfp4
  bool tie_word_embeddings = false;
  std::vector<int32_t> eos_token_ids;
};

// Parses a config.json object of this family. Every bad field is named in
// one InvalidArgument: missing or mistyped fields, head counts that do not
// divide, layer_types of the wrong length or with an unknown kind,
// swiglu_limit <= 0, a sliding window without a positive size, RoPE
// scaling other than YaRN, quantisation other than MXFP4 experts, top-k
// above the experts.
absl::StatusOr<GptOssConfig> ParseGptOssConfig(const nlohmann::json& root,
                                               absl::string_view source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_CONFIG_H_
