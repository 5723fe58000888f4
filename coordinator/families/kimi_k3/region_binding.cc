#include "coordinator/families/kimi_k3/region_binding.h"

#include "shared/base/status_macros.h"
#include "shared/family/kimi_k3/kimi_k3_schema.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::coordinator {
namespace {

using model::DType;

// Resolves fields of a region into views, checking them against the schema.
class Binder {
 public:
  Binder(const pack::RegionLayout& layout, const uint8_t* base)
      : layout_(layout), base_(base) {}

  Matrix M(absl::string_view name) const {
    const pack::RegionField* f = layout_.Find(name);
    Matrix m;
    if (f == nullptr) return m;
    m.type = f->dtype == DType::kBF16 ? kernels::DenseType::kBF16
                                      : kernels::DenseType::kF32;
    m.data = base_ + f->offset;
    m.rows = f->shape[0];
    m.cols = f->shape[1];
    return m;
  }
  Vec V(absl::string_view name) const {
    const pack::RegionField* f = layout_.Find(name);
    if (f == nullptr) return Vec();
    return Vec(reinterpret_cast<const float*>(base_ + f->offset),
               f->nbytes / sizeof(float));
  }

 private:
  const pack::RegionLayout& layout_;
  const uint8_t* base_;
};

}  // namespace

absl::StatusOr<LayerWeights> BindLayer(const pack::RegionLayout& layout,
                                       const uint8_t* base,
                                       const model::K3Config& c, int layer,
                                       int parts) {
  Binder b(layout, base);
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(layout, family::kimi_k3::LayerSchema(c, layer, parts)));
  LayerWeights w;
  w.is_mla = c.IsMlaLayer(layer);
  w.is_dense = c.IsDenseLayer(layer);
  w.input_norm = b.V("input_layernorm");
  w.post_norm = b.V("post_attention_layernorm");
  w.attn_res_fold = b.V("attn_res_fold");
  w.mlp_res_fold = b.V("mlp_res_fold");
  if (w.is_mla) {
    MlaWeights& m = w.mla;
    m.q_a = b.M("q_a_proj");
    m.q_a_norm = b.V("q_a_layernorm");
    m.q_b = b.M("q_b_proj");
    m.kv_a = b.M("kv_a_proj");
    m.kv_a_norm = b.V("kv_a_layernorm");
    m.kv_b = b.M("kv_b_proj");
    m.uk_t = b.M("uk_t");
    m.o_proj = b.M("o_proj");
    m.g_proj = b.M("g_proj");
  } else {
    KdaWeights& k = w.kda;
    k.q_proj = b.M("q_proj");
    k.k_proj = b.M("k_proj");
    k.v_proj = b.M("v_proj");
    k.g_proj = b.M("g_proj");
    k.o_proj = b.M("o_proj");
    k.f_a = b.M("f_a_proj");
    k.f_b = b.M("f_b_proj");
    k.b_proj = b.M("b_proj");
    k.q_conv = b.V("q_conv");
    k.k_conv = b.V("k_conv");
    k.v_conv = b.V("v_conv");
    k.a_log = b.V("A_log");
    k.dt_bias = b.V("dt_bias");
    k.o_norm = b.V("o_norm");
  }
  if (w.is_dense) {
    w.dense.gate = b.M("mlp.gate");
    w.dense.up = b.M("mlp.up");
    w.dense.down = b.M("mlp.down");
  } else {
    MoeWeights& m = w.moe;
    m.router = b.M("router");
    m.bias = b.V("router_bias");
    m.down = b.M("latent_down");
    m.up = b.M("latent_up");
    m.latent_norm = b.V("latent_norm");
    m.shared_gate = b.M("shared_gate");
    m.shared_up = b.M("shared_up");
    m.shared_down = b.M("shared_down");
  }
  return w;
}

absl::StatusOr<GlobalWeights> BindGlobals(const pack::RegionLayout& layout,
                                          const uint8_t* base,
                                          const model::K3Config& c) {
  Binder b(layout, base);
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(layout, family::kimi_k3::GlobalsSchema(c)));
  GlobalWeights g;
  g.final_norm = b.V("final_norm");
  g.out_res_fold = b.V("out_res_fold");
  return g;
}

absl::StatusOr<Matrix> BindVocab(const pack::RegionLayout& layout,
                                 const uint8_t* base,
                                 const model::K3Config& c) {
  Binder b(layout, base);
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(layout, family::kimi_k3::VocabSchema(c, false)));
  return b.M("matrix");
}

}  // namespace flotilla::coordinator
