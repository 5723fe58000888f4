// GptOssBinder: a gpt-oss layer region (gpt_oss_schema.h) bound into the
// views GptOssModel reads, after checking it against the schema.
#include "coordinator/families/gpt_oss/gpt_oss_model.h"
#include "coordinator/model/region_fields.h"
#include "shared/base/status_macros.h"
#include "shared/family/gpt_oss/gpt_oss_schema.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {
namespace {

absl::Status Bind(const model::GptOssConfig& c, int layer,
                  const pack::RegionLayout& l, const uint8_t* base,
                  GptOssLayer* out) {
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(l, family::gpt_oss::LayerSchema(c, layer)));
  const RegionFields r{l, base, layer};
  FLOTILLA_ASSIGN_OR_RETURN(out->input_norm, r.Vector("input_norm"));
  FLOTILLA_ASSIGN_OR_RETURN(out->post_norm, r.Vector("post_norm"));
  FLOTILLA_ASSIGN_OR_RETURN(out->q, r.Matrix("q_proj"));
  FLOTILLA_ASSIGN_OR_RETURN(out->k, r.Matrix("k_proj"));
  FLOTILLA_ASSIGN_OR_RETURN(out->v, r.Matrix("v_proj"));
  FLOTILLA_ASSIGN_OR_RETURN(out->o, r.Matrix("o_proj"));
  FLOTILLA_ASSIGN_OR_RETURN(out->router, r.Matrix("router"));
  FLOTILLA_ASSIGN_OR_RETURN(out->q_bias, r.Vector("q_bias"));
  FLOTILLA_ASSIGN_OR_RETURN(out->k_bias, r.Vector("k_bias"));
  FLOTILLA_ASSIGN_OR_RETURN(out->v_bias, r.Vector("v_bias"));
  FLOTILLA_ASSIGN_OR_RETURN(out->o_bias, r.Vector("o_bias"));
  FLOTILLA_ASSIGN_OR_RETURN(out->router_bias, r.Vector("router_bias"));
  FLOTILLA_ASSIGN_OR_RETURN(out->sinks, r.Vector("sinks"));
  return absl::OkStatus();
}

}  // namespace

RegionBinder GptOssBinder(const model::GptOssConfig& config) {
  return BinderOf<GptOssLayer>(
      [config](int layer, const pack::RegionLayout& layout, const uint8_t* data,
               GptOssLayer* bound) {
        return Bind(config, layer, layout, data, bound);
      });
}

}  // namespace flotilla::coordinator
