// Trunk regions: the compute-ready bytes of one piece of the trunk (one
// layer's non-expert tensors, the embedding, the lm_head, or the model-level
// vectors), laid out once so the forward pass can bind views into them.
// This header is the layout half of the pack format: what a region holds
// (trunk_schema.h says which fields), where each field sits, and how a
// layout is checked and (de)serialised for the manifest. The builder
// (region_builder.h) fills regions; the coordinator binds views into them.
//
// Region contents: matrices keep their stored precision (BF16 or F32; F16 is
// widened to F32; FP8 e4m3 codes stay bytes beside their block-scale field);
// vectors are F32; derived tensors are precomputed at build time: the AttnRes
// folds (norm * proj), A_log cut to H entries, and the per-head transposed key
// half of MLA's kv_b (uk_t). Fields start at 64-byte offsets; the region size
// is a multiple of 4 KiB so regions can be read with O_DIRECT.
#ifndef FLOTILLA_SHARED_PACK_REGION_LAYOUT_H_
#define FLOTILLA_SHARED_PACK_REGION_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/io/aligned_buffer.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::pack {

// Fields start at multiples of this many bytes inside a region.
inline constexpr uint64_t kFieldAlign = 64;

struct RegionField {
  std::string name;  // e.g. "q_proj", "attn_res_fold", "uk_t"
  model::DType dtype = model::DType::kF32;  // kF32, kBF16 or kF8E4M3
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

// The shape a field of `spec` has: [rows][cols] for matrices, [rows] else.
std::vector<int64_t> FieldShape(const FieldSpec& spec);

// The layout `schema` gets from `source`: checks every source tensor
// (presence, shape, dtype) and gives each field the dtype the builder will
// store. Errors name the tensor and its file.
absl::StatusOr<RegionLayout> ResolveLayout(
    const model::TensorSource& source, const std::vector<FieldSpec>& schema);
// The layout `schema` would have with BF16 matrices (how the released
// checkpoint stores them), from the config alone: for planning runs on
// machines that do not hold the model.
RegionLayout PlannedLayout(const std::vector<FieldSpec>& schema);

// Whether a layout read back (from a manifest, or built) holds every field
// of `schema` with the dtype, shape and size the schema implies, inside the
// region. DataLoss naming the field otherwise.
absl::Status CheckLayout(const RegionLayout& layout,
                         const std::vector<FieldSpec>& schema);

// Layout (de)serialisation for the pack manifest.
std::string LayoutToJson(const RegionLayout& layout);
absl::StatusOr<RegionLayout> LayoutFromJson(absl::string_view json);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_REGION_LAYOUT_H_
