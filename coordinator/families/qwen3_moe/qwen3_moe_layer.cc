// Qwen3MoeBinder: a Qwen3-MoE layer region (qwen3_moe_schema.h) bound into
// the views Qwen3MoeModel reads, after checking it against the schema.
#include "absl/strings/str_cat.h"
#include "coordinator/families/qwen3_moe/qwen3_moe_model.h"
#include "shared/base/status_macros.h"
#include "shared/family/qwen3_moe/qwen3_moe_schema.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {
namespace {

using pack::RegionField;
using pack::RegionLayout;

absl::StatusOr<const RegionField*> Field(const RegionLayout& l,
                                         const char* name, int layer) {
  const RegionField* f = l.Find(name);
  if (f == nullptr) {
    return absl::DataLossError(
        absl::StrCat("layer ", layer, "'s region has no field ", name));
  }
  return f;
}

absl::StatusOr<kernels::DenseMatrix> Matrix(const RegionLayout& l,
                                            const uint8_t* base,
                                            const char* name, int layer) {
  FLOTILLA_ASSIGN_OR_RETURN(const RegionField* f, Field(l, name, layer));
  kernels::DenseMatrix m;
  m.type = f->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                           : kernels::DenseType::kF32;
  m.data = base + f->offset;
  m.rows = f->shape[0];
  m.cols = f->shape[1];
  return m;
}

absl::StatusOr<const float*> Vector(const RegionLayout& l, const uint8_t* base,
                                    const char* name, int layer) {
  FLOTILLA_ASSIGN_OR_RETURN(const RegionField* f, Field(l, name, layer));
  return reinterpret_cast<const float*>(base + f->offset);
}

absl::Status Bind(const model::Qwen3MoeConfig& c, int layer,
                  const RegionLayout& l, const uint8_t* base,
                  Qwen3MoeLayer* out) {
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(l, family::qwen3_moe::LayerSchema(c, layer)));
  FLOTILLA_ASSIGN_OR_RETURN(out->input_norm,
                            Vector(l, base, "input_norm", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->post_norm,
                            Vector(l, base, "post_norm", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->q_norm, Vector(l, base, "q_norm", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->k_norm, Vector(l, base, "k_norm", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->q, Matrix(l, base, "q_proj", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->k, Matrix(l, base, "k_proj", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->v, Matrix(l, base, "v_proj", layer));
  FLOTILLA_ASSIGN_OR_RETURN(out->o, Matrix(l, base, "o_proj", layer));
  out->moe = c.IsMoeLayer(layer);
  if (out->moe) {
    FLOTILLA_ASSIGN_OR_RETURN(out->router, Matrix(l, base, "router", layer));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(out->gate, Matrix(l, base, "gate_proj", layer));
    FLOTILLA_ASSIGN_OR_RETURN(out->up, Matrix(l, base, "up_proj", layer));
    FLOTILLA_ASSIGN_OR_RETURN(out->down, Matrix(l, base, "down_proj", layer));
  }
  return absl::OkStatus();
}

}  // namespace

RegionBinder Qwen3MoeBinder(const model::Qwen3MoeConfig& config) {
  return BinderOf<Qwen3MoeLayer>([config](int layer, const RegionLayout& layout,
                                          const uint8_t* data,
                                          Qwen3MoeLayer* bound) {
    return Bind(config, layer, layout, data, bound);
  });
}

}  // namespace flotilla::coordinator
