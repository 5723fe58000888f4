// The one expert-tensor checker: which tensors of a checkpoint make up one
// routed expert, and whether they do. Used by the expert index (streamed
// and worker reads), LocalExperts (in-memory reference) and `flotilla-tool
// pack`, so the three accept and refuse exactly the same checkpoints.
//
// An expert is three matrices w1 (gate), w2 (down), w3 (up), applied as
// y = W x with W[rows][cols]. Each is either MXFP4 (`weight_packed` U8
// [rows][cols/2] plus `weight_scale` U8 [rows][cols/32], with an F32
// `bias` [rows] on all three or none: mxfp4_bias), FP8 e4m3
// (`weight` F8_E4M3 plus `weight_scale_inv` F32 [ceil(rows/128)]
// [ceil(cols/128)]) or dense (`weight`, F32 or BF16); the three share one
// format and, dense, one dtype.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_TENSORS_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_TENSORS_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/experts/expert_types.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"

namespace flotilla::experts {

// The tensors of one expert as found in a source: [which: w1, w2, w3]
// [part: weight_packed, weight_scale, weight, weight_scale_inv, bias]; null
// when absent.
enum ExpertTensorPart : int {
  kPackedPart = 0,
  kScalePart = 1,
  kDensePart = 2,
  kScaleInvPart = 3,
  kBiasPart = 4,
};
inline constexpr int kExpertTensorParts = 5;
// The name suffix of each ExpertTensorPart.
inline constexpr const char* kExpertPartSuffix[kExpertTensorParts] = {
    "weight_packed", "weight_scale", "weight", "weight_scale_inv", "bias"};

struct FoundExpertTensors {
  model::ExpertNaming naming;  // MoeSpec::expert_names
  const model::TensorInfo* t[3][kExpertTensorParts] = {};
};

// model::ExpertMatrixPrefix + suffix ("model.layers.3.block_sparse_moe.
// experts.7.w1.weight"), for lookups and error messages.
std::string ExpertTensorName(const model::ExpertNaming& naming, int layer,
                             int expert, int which, const char* suffix);

// Looks up (layer, expert) under the release's names (tensor_names.h).
FoundExpertTensors FindExpertTensors(const model::TensorSource& source,
                                     const model::ExpertNaming& naming,
                                     int layer, int expert);

struct ExpertTensors {
  ExpertFormat format = ExpertFormat::kMxfp4;
  std::array<MatrixShape, 3> shapes;  // logical shapes of w1, w2, w3
  // Canonical order: w1.packed, w1.scale, w2.packed, w2.scale, w3.packed,
  // w3.scale (MXFP4; with biases each matrix's bias follows its scale), or
  // w1, w2, w3 (dense) -- the order of ExpertLocation::tensor_offsets.
  std::vector<const model::TensorInfo*> parts;
};

// Checks what was found: every matrix present in one format, 2-D, MXFP4
// U8 with matching packed/scale shapes (group size 32), FP8 with an F32
// scale of the block grid's shape, dense F32 or BF16 with one dtype. Errors
// name the tensor and its file.
absl::StatusOr<ExpertTensors> CheckExpertTensors(
    const FoundExpertTensors& found, const ExpertKey& key);

// That the shapes are an expert of `config`: w1 = w3 = [I][L], w2 = [L][I]
// (I = moe_intermediate_size, L = routed_expert_hidden_size).
absl::Status CheckExpertShapes(const ExpertTensors& tensors,
                               const model::MoeSpec& config,
                               const ExpertKey& key);

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_TENSORS_H_
