// Tensor names of the Hugging Face checkpoint layouts: the one place the
// routed experts' naming schemes are spelled out (kExpertSchemes; built by
// ExpertMatrixPrefix, read by ParseExpertTensorName) for the expert index,
// the checks, the packers and synth; and Kimi K3's layer prefix for its
// trunk schema.
#ifndef FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_
#define FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace flotilla::model {

// "language_model.model.layers.<L>."
inline std::string LayerPrefix(int layer) {
  return absl::StrCat("language_model.model.layers.", layer, ".");
}

// What comes before "layers.<L>." in Kimi K3's tensor names.
inline constexpr char kK3TensorPrefix[] = "language_model.model.";

// How a family names its routed experts' matrices, the one naming table:
// "<prefix>layers.<L>.<experts><e>.<matrices[which]>." then the part
// ("weight", "weight_packed", "weight_scale", "weight_scale_inv"), `which`
// 0, 1, 2 = gate, down, up.
struct ExpertScheme {
  absl::string_view experts;
  absl::string_view matrices[3];
};
// Mixtral and Kimi K3: block_sparse_moe.experts.<e>.w1 (gate), w2 (down),
// w3 (up).
inline constexpr ExpertScheme kBlockSparseMoeExperts = {
    "block_sparse_moe.experts.", {"w1", "w2", "w3"}};
// DeepSeek-V3 / Kimi K2 and Qwen3-MoE: mlp.experts.<e>.gate_proj,
// down_proj, up_proj.
inline constexpr ExpertScheme kMlpExperts = {
    "mlp.experts.", {"gate_proj", "down_proj", "up_proj"}};
// Every scheme ParseExpertTensorName recognises.
inline constexpr const ExpertScheme* kExpertSchemes[] = {
    &kBlockSparseMoeExperts, &kMlpExperts};

// A family's expert names: its prefix ("model." for Mixtral,
// "language_model.model." for Kimi K3) and scheme.
struct ExpertNaming {
  std::string prefix;
  const ExpertScheme* scheme = &kBlockSparseMoeExperts;
};

// Prefix of one routed expert matrix: "<prefix>layers.<L>.<experts><e>.
// <matrix>.".
inline std::string ExpertMatrixPrefix(const ExpertNaming& naming, int layer,
                                      int expert, int which) {
  return absl::StrCat(naming.prefix, "layers.", layer, ".",
                      naming.scheme->experts, expert, ".",
                      naming.scheme->matrices[which], ".");
}

// One routed expert tensor's name, taken apart.
struct ExpertTensorName {
  ExpertNaming naming;
  int layer = 0;
  int expert = 0;
  int which = -1;      // 0, 1, 2 for gate, down, up; -1 for another part
  std::string suffix;  // after "<matrix>." ("weight", "weight_packed", ...),
                       // or after "<e>." when `which` is -1
};

// Parses "<prefix>layers.<L>.<experts><e>.<rest>" of any scheme of
// kExpertSchemes, with decimal L and e; false for every other name (trunk
// tensors, shared experts and fused all-expert tensors included).
bool ParseExpertTensorName(absl::string_view name, ExpertTensorName* out);
inline bool IsExpertTensorName(absl::string_view name) {
  ExpertTensorName unused;
  return ParseExpertTensorName(name, &unused);
}

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_
