// What a trunk region holds, field by field (FieldSpec), as each family's
// schema lists it (shared/family/<family>/..._schema.h): the single
// description shared by the region builder, the binder and the planner, so
// the three cannot drift apart.
#ifndef FLOTILLA_SHARED_PACK_TRUNK_SCHEMA_H_
#define FLOTILLA_SHARED_PACK_TRUNK_SCHEMA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flotilla::pack {

// Which parts of a layer a region holds (Kimi K3's layer fixtures hold only
// some).
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
  // FP8 e4m3 codes [rows][cols] copied as stored (F8_E4M3 only); `src2`
  // names the region field holding its 128x128 block scales (a kVector of
  // the checkpoint's `<name>_scale_inv`), which the builder checks the
  // codes against: no NaN code, every scale finite and positive.
  kFp8Matrix,
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

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_TRUNK_SCHEMA_H_
