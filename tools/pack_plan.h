// The plan of a pack: where every trunk region and every expert run goes,
// fixed from the checkpoint's headers before a byte is written, so that a
// resumed pack writes exactly the same offsets as an uninterrupted one.
//
// Trunk regions (trunk.bin): layers 0..N-1, then "embed", "lm_head",
// "globals", back to back (each region is a 4 KiB multiple). Their layouts
// are resolved from the checkpoint's dtypes with the region builder's rules
// (trunk_region.h: BF16 matrices stay BF16, F32/F16 matrices become F32,
// vectors are F32), and the pack checks every built region against its
// planned layout.
//
// Experts: served in place (experts_in_model_dir) when every expert's
// tensors tile one contiguous run in one shard; otherwise copied into
// experts.bin, one run per expert at a 4 KiB-aligned offset, tensors in
// canonical order (w1.packed, w1.scale, w2.packed, w2.scale, w3.packed,
// w3.scale; dense: w1, w2, w3) back to back.
#ifndef FLOTILLA_TOOLS_PACK_PLAN_H_
#define FLOTILLA_TOOLS_PACK_PLAN_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/family/family.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_layout.h"

namespace flotilla::tools {

inline constexpr char kTrunkFile[] = "trunk.bin";
inline constexpr char kExpertsFile[] = "experts.bin";
inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kStateFile[] = "pack.state";

struct PlannedRegion {
  std::string kind;  // "layer", "embed", "lm_head", "globals"
  int layer = -1;
  uint64_t offset = 0;  // in trunk.bin, multiple of 4096
  pack::RegionLayout layout;
};

struct PlannedExpert {
  int layer = 0;
  int expert = 0;
  int file = 0;         // index into PackPlan::expert_files
  uint64_t offset = 0;  // of the run in that file (in place or experts.bin)
  uint64_t length = 0;
  experts::TensorOffsets tensor_offsets{};  // relative to `offset`
  // Source tensors in canonical order (codec parts x 3); owned by
  // the TensorSource the plan was made from.
  std::vector<const model::TensorInfo*> tensors;
};

// Checksums of one written region: the whole region, plus one per
// pack::kVocabChunkRows rows for "embed" and "lm_head" (empty otherwise).
struct RegionSums {
  uint64_t checksum = 0;
  std::vector<uint64_t> chunks;
};

// The chunk_rows a region of this kind gets in the manifest.
uint64_t ChunkRowsFor(const std::string& kind);

// Per-chunk checksums of a vocab region's "matrix" field (`base` holds the
// region); empty when the region has no chunks.
std::vector<uint64_t> ChunkChecksums(const std::string& kind,
                                     const pack::RegionLayout& layout,
                                     const uint8_t* base);

struct PackPlan {
  // The model's family config (shared/family): schemas and experts.
  std::shared_ptr<const family::FamilyConfig> config;
  std::string config_text;  // config.json, verbatim
  std::string fingerprint;  // FingerprintCheckpoint of the model dir
  std::vector<std::string> source_shards;  // model::CheckpointShards
  std::string source_stamp;                // model::CheckpointStamp
  std::vector<PlannedRegion> regions;
  uint64_t trunk_bytes = 0;   // size of trunk.bin
  std::string expert_format;  // an expert_codec.h name ("mxfp4", ...)
  bool experts_in_model_dir = true;
  // Relative to the model dir (in place) or the pack dir (experts.bin).
  std::vector<std::string> expert_files;
  std::vector<PlannedExpert> experts;  // sorted by (layer, expert)
  // The family's ExpertView of the checkpoint (FamilyConfig::ExpertView),
  // when it has one: `experts[].tensors` are its tensors, read through it.
  // It refers to the TensorSource the plan was made from.
  std::shared_ptr<const model::TensorSource> expert_view;
  uint64_t experts_file_bytes = 0;  // size of experts.bin; 0 in place
  uint64_t expert_bytes = 0;        // sum of run lengths

  // The manifest this plan produces, with the given checksums (one per
  // region / expert, in plan order; missing ones are zero / empty).
  pack::PackManifest ToManifest(const std::vector<RegionSums>& region_sums,
                                const std::vector<uint64_t>& expert_sums,
                                bool complete) const;
  // Identifies the plan (offsets, layouts, formats; not checksums): a
  // resumed pack continues only a state written for the same plan.
  std::string Id() const;
};

// Plans a pack of the checkpoint in `model_dir` (opened as `source`). Fails,
// naming the tensor, when a trunk tensor or an expert is missing or
// misshapen, or the experts mix formats.
absl::StatusOr<PackPlan> PlanPack(const std::string& model_dir,
                                  const model::TensorSource& source);

// `file` relative to `dir` ("model-00002-of-00096.safetensors"); error when
// it lies outside.
absl::StatusOr<std::string> PathRelativeTo(const std::string& dir,
                                           const std::string& file);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_PLAN_H_
