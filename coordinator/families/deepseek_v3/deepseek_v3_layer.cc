#include "coordinator/families/deepseek_v3/deepseek_v3_layer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "coordinator/model/yarn_rope.h"
#include "shared/base/status_macros.h"
#include "shared/family/deepseek_v3/deepseek_v3_schema.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {
namespace {

using pack::RegionField;
using pack::RegionLayout;

// A region's bytes and the layer they hold, for views and errors.
struct Region {
  const RegionLayout& layout;
  const uint8_t* base;
  int layer;

  absl::StatusOr<const RegionField*> Field(const std::string& name) const {
    const RegionField* f = layout.Find(name);
    if (f == nullptr) {
      return absl::DataLossError(
          absl::StrCat("layer ", layer, "'s region has no field ", name));
    }
    return f;
  }
  absl::StatusOr<const float*> Vector(const std::string& name) const {
    FLOTILLA_ASSIGN_OR_RETURN(const RegionField* f, Field(name));
    return reinterpret_cast<const float*>(base + f->offset);
  }
  // A projection: FP8 codes with the "<name>_scale_inv" field, or dense.
  absl::StatusOr<kernels::WeightMatrix> Matrix(const std::string& name) const {
    FLOTILLA_ASSIGN_OR_RETURN(const RegionField* f, Field(name));
    if (f->dtype == model::DType::kF8E4M3) {
      FLOTILLA_ASSIGN_OR_RETURN(
          const float* scales,
          Vector(name + family::deepseek_v3::kScaleSuffix));
      kernels::Fp8BlockMatrix m;
      m.codes = base + f->offset;
      m.scale_inv = scales;
      m.rows = f->shape[0];
      m.cols = f->shape[1];
      return kernels::WeightMatrix::Fp8(m);
    }
    return kernels::WeightMatrix::Dense(Dense(*f));
  }
  kernels::DenseMatrix Dense(const RegionField& f) const {
    kernels::DenseMatrix m;
    m.type = f.dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                            : kernels::DenseType::kF32;
    m.data = base + f.offset;
    m.rows = f.shape[0];
    m.cols = f.shape[1];
    return m;
  }
};

absl::Status Bind(const model::DeepSeekV3Config& c, int layer,
                  const RegionLayout& layout, const uint8_t* data,
                  DeepSeekV3Layer* out) {
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(layout, family::deepseek_v3::LayerSchema(c, layer)));
  const Region r{layout, data, layer};
  FLOTILLA_ASSIGN_OR_RETURN(out->input_norm, r.Vector("input_norm"));
  FLOTILLA_ASSIGN_OR_RETURN(out->post_norm, r.Vector("post_norm"));
  LatentAttentionWeights& a = out->attention;
  if (c.q_lora_rank > 0) {
    FLOTILLA_ASSIGN_OR_RETURN(a.q_a, r.Matrix("q_a_proj"));
    FLOTILLA_ASSIGN_OR_RETURN(a.q_a_norm, r.Vector("q_a_norm"));
    FLOTILLA_ASSIGN_OR_RETURN(a.q_b, r.Matrix("q_b_proj"));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(a.q_proj, r.Matrix("q_proj"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(a.kv_a, r.Matrix("kv_a_proj"));
  FLOTILLA_ASSIGN_OR_RETURN(a.kv_a_norm, r.Vector("kv_a_norm"));
  FLOTILLA_ASSIGN_OR_RETURN(a.kv_b, r.Matrix("kv_b_proj"));
  FLOTILLA_ASSIGN_OR_RETURN(a.o_proj, r.Matrix("o_proj"));
  out->moe = c.IsMoeLayer(layer);
  if (!out->moe) {
    out->has_ffn = true;
    FLOTILLA_ASSIGN_OR_RETURN(out->gate, r.Matrix("gate_proj"));
    FLOTILLA_ASSIGN_OR_RETURN(out->up, r.Matrix("up_proj"));
    FLOTILLA_ASSIGN_OR_RETURN(out->down, r.Matrix("down_proj"));
    return absl::OkStatus();
  }
  FLOTILLA_ASSIGN_OR_RETURN(const RegionField* router, r.Field("router"));
  out->router = r.Dense(*router);
  FLOTILLA_ASSIGN_OR_RETURN(out->router_bias, r.Vector("router_bias"));
  out->has_ffn = c.n_shared_experts > 0;
  if (out->has_ffn) {
    FLOTILLA_ASSIGN_OR_RETURN(out->gate, r.Matrix("shared_gate"));
    FLOTILLA_ASSIGN_OR_RETURN(out->up, r.Matrix("shared_up"));
    FLOTILLA_ASSIGN_OR_RETURN(out->down, r.Matrix("shared_down"));
  }
  return absl::OkStatus();
}

}  // namespace

RegionBinder DeepSeekV3Binder(const model::DeepSeekV3Config& config) {
  return BinderOf<DeepSeekV3Layer>(
      [config](int layer, const RegionLayout& layout, const uint8_t* data,
               DeepSeekV3Layer* bound) {
        return Bind(config, layer, layout, data, bound);
      });
}

LatentAttentionSpec DeepSeekV3AttentionSpec(const model::DeepSeekV3Config& c) {
  LatentAttentionSpec s;
  s.heads = c.num_attention_heads;
  s.q_lora_rank = c.q_lora_rank;
  s.kv_lora_rank = c.kv_lora_rank;
  s.qk_nope_dim = c.qk_nope_head_dim;
  s.qk_rope_dim = c.qk_rope_head_dim;
  s.v_dim = c.v_head_dim;
  // Upstream builds q_a_layernorm and kv_a_layernorm without an eps.
  s.q_norm_eps = 1e-6f;
  s.kv_norm_eps = 1e-6f;
  s.softmax_scale = c.SoftmaxScale();
  s.rope_interleaved = c.rope_interleave;
  if (c.yarn_original_max_position > 0) {
    YarnParams y;
    y.dim = c.qk_rope_head_dim;
    y.theta = c.rope_theta;
    // Upstream's f is the context ratio, not rope_scaling.factor.
    y.factor = static_cast<double>(c.max_position_embeddings) /
               c.yarn_original_max_position;
    y.original_max_position = c.yarn_original_max_position;
    y.beta_fast = c.yarn_beta_fast;
    y.beta_slow = c.yarn_beta_slow;
    y.mscale = c.yarn_mscale;
    y.mscale_all_dim = c.yarn_mscale_all_dim;
    s.inv_freq = YarnInvFreq(y);
    s.rope_factor = YarnAttentionFactor(y);
  } else {
    // Plain RoPE: theta^(-2i/dim), float32 as torch computes it.
    for (int i = 0; i < c.qk_rope_head_dim / 2; ++i) {
      s.inv_freq.push_back(
          1.0f / std::pow(static_cast<float>(c.rope_theta),
                          static_cast<float>(2 * i) /
                              static_cast<float>(c.qk_rope_head_dim)));
    }
  }
  return s;
}

}  // namespace flotilla::coordinator
