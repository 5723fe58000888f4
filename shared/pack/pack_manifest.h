// The manifest of a packed model (`flotilla-tool pack`): where every trunk
// region and every routed expert lives on disk, with a checksum for each, and
// the fingerprint of the source checkpoint. Written as manifest.json (all but
// the experts) and expert_table.bin (the experts as fixed-size records, see
// expert_table.h) in the pack directory; read by the coordinator (trunk
// streaming, local experts) and by expert workers.
//
// Files referenced by relative path: trunk files are relative to the pack
// directory; expert files are relative to the model directory when
// `in_model_dir` is set (experts served in place from the HF shards), else
// to the pack directory (experts packed by `pack`).
#ifndef FLOTILLA_SHARED_PACK_PACK_MANIFEST_H_
#define FLOTILLA_SHARED_PACK_PACK_MANIFEST_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/experts/expert_types.h"
#include "shared/pack/region_layout.h"

namespace flotilla::pack {

// 2: experts moved from manifest.json to expert_table.bin; source_shards
// and source_stamp added. 3: source_fingerprint and source_stamp (v2)
// include samples of the tensor data (model/checkpoint_fingerprint.h).
inline constexpr int kPackFormatVersion = 3;

// One trunk region: a layer's non-expert tensors ("layer"), the embedding
// ("embed"), the lm_head ("lm_head") or the model-level vectors ("globals").
struct PackRegion {
  std::string kind;       // "layer", "embed", "lm_head", "globals"
  int layer = -1;         // for kind == "layer"
  uint64_t offset = 0;    // in the trunk file, multiple of 4096
  uint64_t size = 0;      // multiple of 4096
  uint64_t checksum = 0;  // XXH3-64 of the region's `size` bytes
  RegionLayout layout;    // where each field sits inside the region
  // Vocab regions ("embed", "lm_head") are also read piecewise: embedding
  // rows on demand, lm_head in chunks when not pinned. So that such partial
  // reads are verified too, these regions carry one XXH3-64 per chunk of
  // `chunk_rows` matrix rows (the last chunk may be shorter), computed over
  // the rows' bytes inside the region's single field "matrix" (offset from
  // its layout). chunk_rows == 0 (other regions) means no chunk checksums.
  uint64_t chunk_rows = 0;
  std::vector<uint64_t> chunk_checksums;
};

// chunk_rows used by `pack` for vocab regions: 64 rows (917 KB at K3 size).
inline constexpr uint64_t kVocabChunkRows = 64;

// One routed expert: a contiguous byte run holding its tensors.
struct PackExpert {
  int layer = 0;
  int expert = 0;
  int file = 0;           // index into PackManifest::expert_files
  uint64_t offset = 0;    // absolute offset of the run in that file
  uint64_t length = 0;    // bytes in the run
  uint64_t checksum = 0;  // XXH3-64 of the run
  // Offsets of the tensors inside the run, relative to `offset`, in the
  // order w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale
  // (MXFP4; mxfp4_bias: w1.packed, w1.scale, w1.bias, w2..., w3...), or w1,
  // w2, w3 (dense); zeros after.
  experts::TensorOffsets tensor_offsets{};
};

struct PackManifest {
  int version = kPackFormatVersion;
  std::string source_fingerprint;  // hex, see FingerprintCheckpoint
  // The source checkpoint's shard files (relative to the model dir) and
  // their model::CheckpointStamp: while the stamp still matches, the
  // fingerprint above still holds, so opening need not parse the
  // checkpoint's ~58 MB index and headers again.
  std::vector<std::string> source_shards;
  std::string source_stamp;  // hex
  std::string config_json;   // the config file's text, verbatim
  std::string trunk_file = "trunk.bin";
  std::vector<PackRegion> regions;
  // "mxfp4" (U8 packed + scale), "mxfp4_bias" (and an F32 bias), "bf16",
  // "f32" (dense experts) or "fp8_e4m3" (expert_codec.h).
  std::string expert_format = "mxfp4";
  bool experts_in_model_dir = true;
  std::vector<std::string> expert_files;
  std::vector<PackExpert> experts;  // sorted by (layer, expert)
  bool complete = false;            // false while a pack is in progress

  const PackRegion* FindLayer(int layer) const;
  const PackRegion* FindRegion(absl::string_view kind) const;
  // The expert entry for (layer, expert), or null.
  const PackExpert* FindExpert(int layer, int expert) const;
};

// The two files of a manifest: manifest.json's text and expert_table.bin's
// bytes. The JSON records the table's record count and XXH3-64.
struct EncodedPackManifest {
  std::string json;
  std::string expert_table;
};
EncodedPackManifest EncodePackManifest(const PackManifest& manifest);

// Errors name the file (`dir`/manifest.json or `dir`/expert_table.bin) and
// what is wrong; a manifest of another format version says to re-run pack.
absl::StatusOr<PackManifest> DecodePackManifest(absl::string_view json,
                                                absl::string_view expert_table,
                                                absl::string_view dir);
// Reads both files from `pack_dir`, complete or not.
absl::StatusOr<PackManifest> ReadPackManifest(const std::string& pack_dir);
// ReadPackManifest, refusing an unfinished pack.
absl::StatusOr<PackManifest> LoadPackManifest(const std::string& pack_dir);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_PACK_MANIFEST_H_
