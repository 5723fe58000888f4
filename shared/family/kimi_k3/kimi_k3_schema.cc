#include "shared/family/kimi_k3/kimi_k3_schema.h"

#include "shared/model/tensor_names.h"
#include "shared/pack/region_builder.h"

namespace flotilla::family::kimi_k3 {

using pack::FieldKind;
using pack::FieldSpec;
using pack::kAttentionPart;
using pack::kFfnPart;
using pack::kNormParts;

using model::LayerPrefix;
namespace {

constexpr char kModelPrefix[] = "language_model.model.";

FieldSpec Mat(std::string field, std::string src, size_t rows, size_t cols) {
  return FieldSpec{
      std::move(field), FieldKind::kMatrix, std::move(src), "", rows, cols};
}
FieldSpec VecField(std::string field, std::string src, size_t n) {
  return FieldSpec{
      std::move(field), FieldKind::kVector, std::move(src), "", n, 0};
}
FieldSpec Fold(std::string field, std::string norm, std::string proj,
               size_t n) {
  return FieldSpec{std::move(field),
                   FieldKind::kFold,
                   std::move(norm),
                   std::move(proj),
                   n,
                   0};
}

}  // namespace

std::vector<FieldSpec> LayerSchema(const model::K3Config& c, int layer,
                                   int parts) {
  const std::string lp = LayerPrefix(layer);
  const std::string a = lp + "self_attn.";
  const size_t e = c.hidden_size;
  std::vector<FieldSpec> s;
  if (parts & kNormParts) {
    s.push_back(VecField("input_layernorm", lp + "input_layernorm.weight", e));
    s.push_back(VecField("post_attention_layernorm",
                         lp + "post_attention_layernorm.weight", e));
    s.push_back(Fold("attn_res_fold", lp + "self_attention_res_norm.weight",
                     lp + "self_attention_res_proj.weight", e));
    s.push_back(Fold("mlp_res_fold", lp + "mlp_res_norm.weight",
                     lp + "mlp_res_proj.weight", e));
  }
  if ((parts & kAttentionPart) && c.IsMlaLayer(layer)) {
    const size_t hm = c.num_attention_heads, ql = c.q_lora_rank,
                 kvl = c.kv_lora_rank, nope = c.qk_nope_head_dim,
                 rope = c.qk_rope_head_dim, v = c.v_head_dim;
    s.push_back(Mat("q_a_proj", a + "q_a_proj.weight", ql, e));
    s.push_back(VecField("q_a_layernorm", a + "q_a_layernorm.weight", ql));
    s.push_back(Mat("q_b_proj", a + "q_b_proj.weight", hm * (nope + rope), ql));
    s.push_back(
        Mat("kv_a_proj", a + "kv_a_proj_with_mqa.weight", kvl + rope, e));
    s.push_back(VecField("kv_a_layernorm", a + "kv_a_layernorm.weight", kvl));
    s.push_back(Mat("kv_b_proj", a + "kv_b_proj.weight", hm * (nope + v), kvl));
    s.push_back(
        FieldSpec{"uk_t", FieldKind::kUkT, "kv_b_proj", "", hm * kvl, nope});
    s.push_back(Mat("o_proj", a + "o_proj.weight", e, hm * v));
    if (c.mla_use_output_gate) {
      s.push_back(Mat("g_proj", a + "g_proj.weight", hm * v, e));
    }
  } else if (parts & kAttentionPart) {
    const size_t h = c.kda_num_heads, d = c.kda_head_dim, p = h * d,
                 k = c.short_conv_kernel_size;
    for (const char* name : {"q_proj", "k_proj", "v_proj", "g_proj"}) {
      s.push_back(Mat(name, a + name + ".weight", p, e));
    }
    s.push_back(Mat("o_proj", a + "o_proj.weight", e, p));
    s.push_back(Mat("f_a_proj", a + "f_a_proj.weight", d, e));
    s.push_back(Mat("f_b_proj", a + "f_b_proj.weight", p, d));
    s.push_back(Mat("b_proj", a + "b_proj.weight", h, e));
    for (const char* name : {"q_conv", "k_conv", "v_conv"}) {
      FieldSpec conv = VecField(name, a + name + "1d.weight", p * k);
      conv.src_shape = {static_cast<int64_t>(p), 1, static_cast<int64_t>(k)};
      s.push_back(std::move(conv));
    }
    s.push_back(
        FieldSpec{"A_log", FieldKind::kVectorPrefix, a + "A_log", "", h, 0});
    s.push_back(VecField("dt_bias", a + "dt_bias", p));
    s.push_back(VecField("o_norm", a + "o_norm.weight", d));
  }
  if ((parts & kFfnPart) && c.IsDenseLayer(layer)) {
    const size_t i = c.intermediate_size;
    s.push_back(Mat("mlp.gate", lp + "mlp.gate_proj.weight", i, e));
    s.push_back(Mat("mlp.up", lp + "mlp.up_proj.weight", i, e));
    s.push_back(Mat("mlp.down", lp + "mlp.down_proj.weight", e, i));
  } else if (parts & kFfnPart) {
    const std::string m = lp + "block_sparse_moe.";
    const size_t n = c.num_experts, l = c.routed_expert_hidden_size,
                 shared = static_cast<size_t>(c.moe_intermediate_size) *
                          c.num_shared_experts;
    s.push_back(Mat("router", m + "gate.weight", n, e));
    s.push_back(VecField("router_bias", m + "gate.e_score_correction_bias", n));
    s.push_back(Mat("latent_down", m + "routed_expert_down_proj.weight", l, e));
    s.push_back(Mat("latent_up", m + "routed_expert_up_proj.weight", e, l));
    if (c.latent_moe_use_norm) {
      s.push_back(VecField("latent_norm", m + "routed_expert_norm.weight", l));
    }
    if (shared > 0) {
      s.push_back(
          Mat("shared_gate", m + "shared_experts.gate_proj.weight", shared, e));
      s.push_back(
          Mat("shared_up", m + "shared_experts.up_proj.weight", shared, e));
      s.push_back(
          Mat("shared_down", m + "shared_experts.down_proj.weight", e, shared));
    }
  }
  return s;
}

std::vector<FieldSpec> GlobalsSchema(const model::K3Config& c) {
  const std::string p = kModelPrefix;
  const size_t e = c.hidden_size;
  return {VecField("final_norm", p + "norm.weight", e),
          Fold("out_res_fold", p + "output_attn_res_norm.weight",
               p + "output_attn_res_proj.weight", e)};
}

std::vector<FieldSpec> VocabSchema(const model::K3Config& c, bool lm_head) {
  const size_t v = c.vocab_size, e = c.hidden_size;
  if (lm_head) return {Mat("matrix", "language_model.lm_head.weight", v, e)};
  return {
      Mat("matrix", std::string(kModelPrefix) + "embed_tokens.weight", v, e)};
}

absl::StatusOr<pack::Region> BuildLayerRegion(const model::TensorSource& source,
                                              const model::K3Config& config,
                                              int layer, int parts) {
  return pack::BuildRegion(source, LayerSchema(config, layer, parts));
}

absl::StatusOr<pack::Region> BuildGlobalsRegion(
    const model::TensorSource& source, const model::K3Config& config) {
  return pack::BuildRegion(source, GlobalsSchema(config));
}

absl::StatusOr<pack::Region> BuildVocabRegion(const model::TensorSource& source,
                                              const model::K3Config& config,
                                              bool lm_head) {
  return pack::BuildRegion(source, VocabSchema(config, lm_head));
}

}  // namespace flotilla::family::kimi_k3
