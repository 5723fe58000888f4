// Trunk regions: the compute-ready bytes of one piece of the trunk (one
// layer's non-expert tensors, the embedding, the lm_head, or the model-level
// vectors), laid out once so the forward pass can bind views into them.
//
// The same builder serves the in-memory path (regions built in RAM from a
// checkpoint) and `flotilla-tool pack` (regions written to the trunk file and
// later streamed back into ring slots), so every path computes on identical
// bytes and the outputs are bitwise identical whatever the memory budget.
//
// Region contents: matrices keep their stored precision (BF16 or F32; F16 is
// widened to F32); vectors are F32; derived tensors are precomputed at build
// time: the AttnRes folds (norm * proj), A_log cut to H entries, and the
// per-head transposed key half of MLA's kv_b (uk_t). Fields start at 64-byte
// offsets; the region size is a multiple of 4 KiB so regions can be read
// with O_DIRECT.
#ifndef FLOTILLA_COORDINATOR_TRUNK_REGION_H_
#define FLOTILLA_COORDINATOR_TRUNK_REGION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/weights.h"
#include "shared/io/aligned_buffer.h"
#include "shared/model/config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::coordinator {

struct RegionField {
  std::string name;  // e.g. "q_proj", "attn_res_fold", "uk_t"
  model::DType dtype = model::DType::kF32;  // kF32 or kBF16
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the region start, multiple of 64
  uint64_t nbytes = 0;
};

struct RegionLayout {
  std::vector<RegionField> fields;
  uint64_t size = 0;  // multiple of 4096

  const RegionField* Find(absl::string_view name) const;
};

struct Region {
  RegionLayout layout;
  io::AlignedBuffer bytes;  // layout.size bytes
};

// Which parts of a layer a region holds (layer fixtures hold only some).
enum LayerParts : int {
  kNormParts = 1,      // layer norms and AttnRes folds
  kAttentionPart = 2,  // KDA or MLA
  kFfnPart = 4,        // dense FFN or MoE trunk (router, latent, shared)
  kAllLayerParts = 7,
};

absl::StatusOr<Region> BuildLayerRegion(const model::TensorSource& source,
                                        const model::K3Config& config,
                                        int layer, int parts = kAllLayerParts);
// final norm and the output AttnRes fold.
absl::StatusOr<Region> BuildGlobalsRegion(const model::TensorSource& source,
                                          const model::K3Config& config);
// A single [vocab][hidden] matrix: "embed" or "lm_head".
absl::StatusOr<Region> BuildVocabRegion(const model::TensorSource& source,
                                        const model::K3Config& config,
                                        bool lm_head);

// Layout a layer region would have, from the config alone, assuming BF16
// matrices (how the released checkpoint stores them). For planning runs on
// machines that do not hold the model.
RegionLayout PlanLayerLayout(const model::K3Config& config, int layer);
RegionLayout PlanVocabLayout(const model::K3Config& config);

// Binds views into `base` (which must hold layout.size bytes and outlive the
// views). Checks every field's dtype and shape against the config.
absl::StatusOr<LayerWeights> BindLayer(const RegionLayout& layout,
                                       const uint8_t* base,
                                       const model::K3Config& config, int layer,
                                       int parts = kAllLayerParts);
absl::StatusOr<GlobalWeights> BindGlobals(const RegionLayout& layout,
                                          const uint8_t* base,
                                          const model::K3Config& config);
absl::StatusOr<Matrix> BindVocab(const RegionLayout& layout,
                                 const uint8_t* base,
                                 const model::K3Config& config);

// Layout (de)serialisation for the pack manifest.
std::string LayoutToJson(const RegionLayout& layout);
absl::StatusOr<RegionLayout> LayoutFromJson(absl::string_view json);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_TRUNK_REGION_H_
