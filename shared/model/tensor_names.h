// Tensor names of the Hugging Face checkpoint layouts: the one place the
// routed experts' naming scheme is spelled out (built by ExpertMatrixPrefix,
// read by ParseExpertTensorName) for the expert index, the checks, the
// packers and synth; and Kimi K3's layer prefix for its trunk schema.
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

// Prefix of one routed expert matrix, `which` 0, 1, 2 = w1 (gate), w2
// (down), w3 (up): "<prefix>layers.<L>.block_sparse_moe.experts.<e>.
// w<which+1>." (then "weight_packed", "weight_scale" or "weight"). The
// families share this scheme and differ in the prefix (MoeSpec).
inline std::string ExpertMatrixPrefix(const std::string& prefix, int layer,
                                      int expert, int which) {
  return absl::StrCat(prefix, "layers.", layer, ".block_sparse_moe.experts.",
                      expert, ".w", which + 1, ".");
}

// One routed expert tensor's name, taken apart.
struct ExpertTensorName {
  std::string prefix;  // before "layers.<L>."
  int layer = 0;
  int expert = 0;
  int which = -1;      // 0, 1, 2 for w1, w2, w3; -1 for another part
  std::string suffix;  // after "w<n>." ("weight", "weight_packed", ...), or
                       // after "<e>." when `which` is -1
};

// Parses "<prefix>layers.<L>.block_sparse_moe.experts.<e>.<rest>" with
// decimal L and e; false for every other name (trunk tensors included).
bool ParseExpertTensorName(absl::string_view name, ExpertTensorName* out);
inline bool IsExpertTensorName(absl::string_view name) {
  ExpertTensorName unused;
  return ParseExpertTensorName(name, &unused);
}

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_TENSOR_NAMES_H_
