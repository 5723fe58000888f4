// DeepSeekV3FamilyConfig::CheckCheckpoint: config and checkpoint agree
// before anything loops over the config's counts, and the MTP layers
// (num_nextn_predict_layers), which are never run, are what a release holds
// all the same: a broken MTP layer is a broken download, said at open.
#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/family/checkpoint_check.h"
#include "shared/family/deepseek_v3/deepseek_v3_family.h"
#include "shared/family/deepseek_v3/deepseek_v3_schema.h"
#include "shared/pack/region_layout.h"

namespace flotilla::family {
namespace {

using pack::FieldKind;
using pack::FieldSpec;

// A [rows][cols] projection of the MTP layer: FP8 with its block scales
// when the tensor is stored so, else a float matrix.
void AddProjection(const model::TensorSource& source, const std::string& name,
                   size_t rows, size_t cols, std::vector<FieldSpec>* out) {
  const model::TensorInfo* t = source.Find(name);
  if (t != nullptr && t->dtype == model::DType::kF8E4M3) {
    const int64_t sr = (static_cast<int64_t>(rows) + 127) / 128;
    const int64_t sc = (static_cast<int64_t>(cols) + 127) / 128;
    out->push_back(FieldSpec{name, FieldKind::kFp8Matrix, name,
                             name + "_scale_inv", rows, cols});
    out->push_back(FieldSpec{name + "_scale_inv",
                             FieldKind::kVector,
                             name + "_scale_inv",
                             "",
                             static_cast<size_t>(sr * sc),
                             0,
                             {sr, sc}});
    return;
  }
  out->push_back(FieldSpec{name, FieldKind::kMatrix, name, "", rows, cols});
}

// Every tensor of MTP layer `layer`: the decoder layer's own, its routed
// experts, and the MTP head (enorm, hnorm, eh_proj, shared_head, and the
// embedding some releases repeat there).
std::vector<FieldSpec> MtpSchema(const model::DeepSeekV3Config& c,
                                 const model::TensorSource& source, int layer) {
  std::vector<FieldSpec> s = deepseek_v3::LayerSchema(c, layer);
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  const size_t e = c.hidden_size, v = c.vocab_size, i = c.moe_intermediate_size;
  for (int x = 0; x < c.n_routed_experts; ++x) {
    const std::string ex = absl::StrCat(p, "mlp.experts.", x, ".");
    AddProjection(source, ex + "gate_proj.weight", i, e, &s);
    AddProjection(source, ex + "up_proj.weight", i, e, &s);
    AddProjection(source, ex + "down_proj.weight", e, i, &s);
  }
  for (const char* norm :
       {"enorm.weight", "hnorm.weight", "shared_head.norm.weight"}) {
    s.push_back(FieldSpec{p + norm, FieldKind::kVector, p + norm, "", e, 0});
  }
  AddProjection(source, p + "eh_proj.weight", e, 2 * e, &s);
  AddProjection(source, p + "shared_head.head.weight", v, e, &s);
  if (source.Find(p + "embed_tokens.weight") != nullptr) {
    AddProjection(source, p + "embed_tokens.weight", v, e, &s);
  }
  return s;
}

// Dtypes and shapes of the MTP layers' tensors (from the headers), no
// tensor of theirs left unknown, and their block scales and norms finite
// (read: they are small). Their FP8 codes are not read: the MTP experts
// alone are gigabytes, read at no open.
absl::Status CheckMtpLayers(const model::DeepSeekV3Config& c,
                            const model::TensorSource& source,
                            const std::string& source_name) {
  for (int layer = c.num_hidden_layers;
       layer < c.num_hidden_layers + c.num_nextn_predict_layers; ++layer) {
    const std::string where = absl::StrCat(source_name, ": MTP layer ", layer,
                                           " (num_nextn_predict_layers; "
                                           "never run, checked as released)");
    const std::vector<FieldSpec> schema = MtpSchema(c, source, layer);
    if (absl::StatusOr<pack::RegionLayout> layout =
            pack::ResolveLayout(source, schema);
        !layout.ok()) {
      return absl::Status(layout.status().code(),
                          absl::StrCat(where, ": ", layout.status().message()));
    }
    std::set<std::string> known;
    for (const FieldSpec& f : schema) {
      known.insert(f.src);
      if (!f.src2.empty()) known.insert(f.src2);
    }
    const std::string prefix = absl::StrCat("model.layers.", layer, ".");
    std::string unknown;
    source.ForEachTensor([&](const model::TensorInfo& t) {
      if (unknown.empty() && absl::StartsWith(t.name, prefix) &&
          known.count(t.name) == 0) {
        unknown = t.name;
      }
    });
    if (!unknown.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tensor ", unknown, " is not one an MTP layer holds"));
    }
    for (const FieldSpec& f : schema) {
      if (f.kind != FieldKind::kVector) continue;
      const model::TensorInfo* t = source.Find(f.src);
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> values,
                                source.ReadF32(f.src, t->numel()));
      const bool scale = absl::EndsWith(f.src, "_scale_inv");
      for (size_t k = 0; k < values.size(); ++k) {
        if (!std::isfinite(values[k]) || (scale && !(values[k] > 0))) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": tensor ", f.src, ": element ", k, " is ", values[k],
              scale ? " (block scales are finite and positive)"
                    : " (must be finite)"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeepSeekV3FamilyConfig::CheckCheckpoint(
    const model::TensorSource& source, const std::string& source_name) const {
  // The MTP layers (num_nextn_predict_layers) are Moe()'s unused trailing
  // layers: recognised, checked, not run.
  FLOTILLA_RETURN_IF_ERROR(CheckModelLayersCheckpoint(
      *this, source, source_name,
      {"n_routed_experts", "first_k_dense_replace",
       "q_lora_rank, n_shared_experts, first_k_dense_replace and "
       "quantization_config"}));
  return CheckMtpLayers(config_, source, source_name);
}

}  // namespace flotilla::family
