// The list of fields each trunk region holds, derived from the config: the
// single description shared by the region builder, the binder and the
// planner, so the three cannot drift apart.
#ifndef FLOTILLA_SHARED_PACK_TRUNK_SCHEMA_H_
#define FLOTILLA_SHARED_PACK_TRUNK_SCHEMA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shared/model/config.h"

namespace flotilla::pack {

// Which parts of a layer a region holds (layer fixtures hold only some).
enum LayerParts : int {
  kNormParts = 1,      // layer norms and AttnRes folds
  kAttentionPart = 2,  // KDA or MLA
  kFfnPart = 4,        // dense FFN or MoE trunk (router, latent, shared)
  kAllLayerParts = 7,
};

enum class FieldKind {
  kMatrix,        // [rows][cols] copied from `src` (BF16/F32 kept, F16 -> F32)
  kVector,        // rows floats from `src` (widened), exact element count
  kVectorPrefix,  // the first rows floats of `src` (A_log is padded to D)
  kFold,          // rows floats: src[i] * src2[i] (AttnRes norm * proj)
  kUkT,           // per-head transposed key half of the matrix field `src`
};

struct FieldSpec {
  std::string field;  // name inside the region
  FieldKind kind = FieldKind::kMatrix;
  std::string src;   // checkpoint tensor name (or region field for kUkT)
  std::string src2;  // second tensor for kFold
  size_t rows = 0;   // matrix rows, or vector length
  size_t cols = 0;   // matrix cols (0 for vectors)
  // kVector: the checkpoint tensor's exact shape when it is not [rows]
  // (a depthwise conv's [channels, 1, kernel] read as one vector).
  std::vector<int64_t> src_shape = {};
};

// Fields of layer `layer`; `parts` is a LayerParts mask.
std::vector<FieldSpec> LayerSchema(const model::K3Config& config, int layer,
                                   int parts);
std::vector<FieldSpec> GlobalsSchema(const model::K3Config& config);
std::vector<FieldSpec> VocabSchema(const model::K3Config& config, bool lm_head);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_TRUNK_SCHEMA_H_
