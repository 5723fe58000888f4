// Config and checkpoint agree, both ways, before anything loops over the
// config's counts: a config that says 10^9 layers must not send the planner
// into a loop, and one that says fewer layers or no shared experts than the
// checkpoint holds must not run while the extra tensors are ignored.
#ifndef FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_CHECKPOINT_CHECK_H_
#define FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_CHECKPOINT_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::family::kimi_k3 {

// Checks, in one pass over the checkpoint's tensor names and then in loops
// bounded by what the checkpoint holds:
//  * the layers the tensors name are 0..num_hidden_layers-1, the routed
//    experts 0..num_experts-1, and experts appear exactly in the MoE layers;
//  * every tensor is one the config's schema reads (kimi_k3_schema.h) or a
//    routed expert, or a kind documented as ignored: the vision tower and
//    its projector (vision_tower.*, mm_projector.*, multi_modal_projector.*).
// Missing tensors and their shapes are checked where they are read (the
// region layout, the expert index), which name them. InvalidArgument
// naming `source_name`, the config field and a few of the tensors.
absl::Status CheckCheckpoint(const model::K3Config& config,
                             const model::TensorSource& source,
                             const std::string& source_name);

}  // namespace flotilla::family::kimi_k3

#endif  // FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_CHECKPOINT_CHECK_H_
