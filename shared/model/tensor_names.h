// Tensor names of the Kimi K3 checkpoint layout (Hugging Face release,
// docs/k3-architecture.md): the one place the naming scheme is spelled out for
// the trunk schema, the expert checks and the pack planner.
#ifndef FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_
#define FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace flotilla::model {

// "language_model.model.layers.<L>."
inline std::string LayerPrefix(int layer) {
  return absl::StrCat("language_model.model.layers.", layer, ".");
}


// What comes before "layers.<L>." in Kimi K3's tensor names.
inline constexpr char kK3TensorPrefix[] = "language_model.model.";

// Prefix of one routed expert matrix, `which` 0, 1, 2 = w1 (gate), w2
// (down), w3 (up): "<prefix>layers.<L>.block_sparse_moe.experts.<e>.
// w<which+1>." (then "weight_packed", "weight_scale" or "weight"). The
// families share this scheme and differ in the prefix (MoeSpec).
inline std::string ExpertMatrixPrefix(const std::string& prefix, int layer,
                                      int expert, int which) {
  return absl::StrCat(prefix, "layers.", layer, ".block_sparse_moe.experts.",
                      expert, ".w", which + 1, ".");
}

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_
