// The check every family with "model.layers.<L>." names makes before
// anything loops over its config's counts (FamilyConfig::CheckCheckpoint):
// the tensors name layers 0..num_layers-1 (plus the MoeSpec's unused
// trailing layers, such as DeepSeek-V3's MTP layer), routed experts
// 0..num_experts-1 exactly in the MoE layers, and no tensor the schemas do
// not read. InvalidArgument naming `source_name`, the config field and a
// few of the tensors. Missing tensors and shapes are checked where they are
// read (the region layout, the expert index), which name them.
#ifndef FLOTILLA_SHARED_FAMILY_CHECKPOINT_CHECK_H_
#define FLOTILLA_SHARED_FAMILY_CHECKPOINT_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "shared/family/family.h"
#include "shared/model/tensor_source.h"

namespace flotilla::family {

struct CheckpointFields {
  absl::string_view experts;       // "n_routed_experts", "num_experts"
  absl::string_view dense_layers;  // "first_k_dense_replace", ...
  absl::string_view hint;          // fields to compare for unused tensors
};

absl::Status CheckModelLayersCheckpoint(const FamilyConfig& config,
                                        const model::TensorSource& source,
                                        const std::string& source_name,
                                        const CheckpointFields& fields);

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_CHECKPOINT_CHECK_H_
