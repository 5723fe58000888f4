// What the memory plan, the per-token time prediction and the compute probe
// need to know about a model, whatever its family: how many layers and
// routed experts a token touches, what a sequence keeps per position and in
// total, how much working memory a token takes, and the shapes of the work
// a decoded token does. Each family derives one from its config
// (shared/family), so shared/plan never names a family.
#ifndef FLOTILLA_SHARED_MODEL_MODEL_SHAPE_H_
#define FLOTILLA_SHARED_MODEL_MODEL_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shared/model/tensor_source.h"

namespace flotilla::model {

// A trunk matrix a decoded token multiplies once per use.
struct TrunkMatmul {
  DType dtype = DType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  int uses = 0;  // per decoded token, across layers
  // Of `uses`, those computed before the layer waits for its routed
  // experts: the window the experts' guessed reads hide behind.
  int uses_before_experts = 0;
};

struct ModelShape {
  int num_layers = 0;
  int moe_layers = 0;  // layers with routed experts
  int num_experts = 0;
  int experts_per_token = 0;
  int vocab_size = 0;
  int hidden_size = 0;
  // Positions a sequence can reach (the config's max_position_embeddings);
  // 0: no limit of the model's own.
  int max_positions = 0;

  // One sequence's state: what grows with each cached position (attention
  // keys and values, latent caches) and what does not (recurrent state).
  uint64_t state_bytes_per_position = 0;
  uint64_t fixed_state_bytes = 0;
  // Working buffers of one forward pass, per token it carries.
  uint64_t workspace_bytes_per_token = 0;
  // Whether the forward pass can read embedding rows and apply the lm_head
  // in verified chunks (Kimi K3); if not, the plan keeps both resident.
  bool streams_vocab = true;
  // Whether a budget that holds every routed expert after the trunk keeps
  // them all (a cache that always hits). Off for Kimi K3, whose flat
  // routing over 896 experts makes a partial cache useless and a full one
  // too large to matter; on where the experts are small beside RAM.
  bool cache_experts_when_all_fit = false;

  // The work of a decoded token, for the compute probe and the prediction.
  std::vector<TrunkMatmul> matmuls;  // every layer's and the lm_head
  // "mxfp4", "mxfp4_bias", "bf16", "f32" or "fp8_e4m3" (expert_codec.h
  // names)
  std::string expert_format = "mxfp4";
  int expert_hidden = 0;  // an expert's input width
  int expert_intermediate = 0;
  // Recurrent (linear-attention) layers: one state step per head per token.
  int recurrent_layers = 0;
  int recurrent_heads = 0;
  int recurrent_head_dim = 0;
  // Softmax-attention layers: each head scores a key of key_width floats
  // and sums a value of value_width floats per cached position.
  int attention_layers = 0;
  int attention_heads = 0;
  int attention_key_width = 0;
  int attention_value_width = 0;

  uint64_t SequenceStateBytes(int positions) const {
    return static_cast<uint64_t>(positions) * state_bytes_per_position +
           fixed_state_bytes;
  }
  uint64_t WorkspaceBytes(int tokens) const {
    return static_cast<uint64_t>(tokens) * workspace_bytes_per_token;
  }
};

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_MODEL_SHAPE_H_
