// ExpertIndex: where every routed expert's bytes live on disk.
//
// Each expert (layer, expert) is one contiguous byte run in one file, so one
// aligned read loads it (docs/k3-architecture.md section 2). The run holds the
// expert's tensors at recorded offsets: MXFP4 experts have six (w1.packed,
// w1.scale, w2.packed, w2.scale, w3.packed, w3.scale); dense experts (F32 or
// BF16 `.weight`, as in the reference oracle and tests) have three (w1, w2,
// w3). Built either from the safetensors headers of a checkpoint (experts
// served in place; a few gap bytes inside a run are tolerated) or from a
// `flotilla-tool pack` manifest (which also records a checksum per run).
//
// Every expert of an index shares one format and one set of matrix shapes:
// the executor sizes its scratch once and the fetcher sizes its slots from
// max_aligned_run_bytes().
//
// Thread-compatibility: immutable after construction except SetChecksum();
// const methods may be called concurrently.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_INDEX_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_INDEX_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/experts/expert_types.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::experts {

struct ExpertIndexOptions {
  // When set, the index must hold every expert (0..num_experts-1) of every
  // MoE layer (or of `only_layer` when >= 0) with shapes w1/w3 = [I][L],
  // w2 = [L][I] (I = moe_intermediate_size, L = routed_expert_hidden_size),
  // and nothing outside them. Without a config the index takes whatever
  // experts the source has (test fixtures with arbitrary shapes).
  const model::MoeSpec* config = nullptr;
  int only_layer = -1;
  // An expert whose tensors do not tile their span exactly is still served
  // as one read of the whole span when the unused bytes inside it total
  // less than this; otherwise the index refuses it (pack it instead).
  uint64_t max_gap_bytes = 1ull << 20;
};

class ExpertIndex {
 public:
  ExpertIndex() = default;

  // Scans `source` for `...layers.{L}.block_sparse_moe.experts.{e}.{w1,w2,
  // w3}.{weight_packed,weight_scale,weight}` tensors and validates each
  // expert: 2-D tensors; MXFP4 packed/scale U8 with equal row counts and
  // scale cols * 32 == 2 * packed cols; dense F32 or BF16, one dtype for the
  // three; all of an expert's tensors in one file; a contiguous run (see
  // max_gap_bytes). Errors name the tensor and its file.
  static absl::StatusOr<ExpertIndex> FromTensorSource(
      const model::TensorSource& source, const ExpertIndexOptions& options);

  // From a pack manifest. Expert files resolve against `model_dir` when
  // manifest.experts_in_model_dir, else against `pack_dir`. Shapes come from
  // `config` (the manifest does not record them); every expert of every MoE
  // layer must be listed, and each run's tensors must fit inside it.
  // Checksums are taken from the manifest.
  // With require_every_expert false the manifest may list any subset (an
  // expert worker keeps only the experts it owns).
  static absl::StatusOr<ExpertIndex> FromPackManifest(
      const pack::PackManifest& manifest, const model::MoeSpec& config,
      const std::string& model_dir, const std::string& pack_dir,
      bool require_every_expert = true);

  // Null when (layer, expert) is not in the index.
  const ExpertLocation* Find(const ExpertKey& key) const;
  // Like Find, but NotFound naming the key.
  absl::StatusOr<const ExpertLocation*> Get(const ExpertKey& key) const;
  bool HasLayer(int layer) const;

  // Bounds of the (layer, expert) grid; not every pair need be present.
  int num_layers() const { return num_layers_; }
  int num_experts() const { return num_experts_; }
  size_t size() const { return size_; }  // experts present
  std::vector<ExpertKey> Keys() const;   // sorted

  const std::vector<std::string>& files() const { return files_; }
  ExpertFormat format() const { return format_; }
  // shape(0), shape(1), shape(2): logical shapes of w1, w2, w3.
  const MatrixShape& shape(int which) const { return shapes_[which]; }

  // Largest run, and largest 4 KiB-aligned read covering a run (what one
  // fetch slot must hold).
  uint64_t max_run_bytes() const { return max_run_bytes_; }
  uint64_t max_aligned_run_bytes() const { return max_aligned_run_bytes_; }
  // Experts served as a span with gap bytes (not tiled exactly).
  size_t noncontiguous_experts() const { return noncontiguous_; }

  // Bytes of one expert run for a config (planning before an index exists):
  // 17,547,264 for K3 MXFP4.
  static uint64_t RunBytesFor(const model::MoeSpec& config,
                              ExpertFormat format);
  // Slot size that holds any aligned read of a run of `run_bytes`,
  // wherever it starts: AlignUp(run_bytes) + 4 KiB.
  static uint64_t SlotBytesFor(uint64_t run_bytes);

  // Heap bytes the index keeps: one ExpertLocation per (layer, expert) of
  // the grid, present or not, plus the file names. MemoryBytesFor is the
  // same figure before an index exists (the memory plan), for a grid of
  // `num_layers` x `num_experts` and file names of ~64 bytes.
  uint64_t memory_bytes() const;
  static uint64_t MemoryBytesFor(int num_layers, int num_experts,
                                 int num_files);

  // Records (or overrides) the checksum of one expert's run.
  absl::Status SetChecksum(const ExpertKey& key, uint64_t checksum);

  // "layer 3 expert 17 (model-00004.safetensors at offset 123, 456 bytes)",
  // for error messages.
  std::string Describe(const ExpertKey& key) const;

 private:
  friend class IndexBuilder;

  std::vector<std::string> files_;
  ExpertFormat format_ = ExpertFormat::kMxfp4;
  std::array<MatrixShape, 3> shapes_{};
  int num_layers_ = 0;
  int num_experts_ = 0;
  size_t size_ = 0;
  size_t noncontiguous_ = 0;
  uint64_t max_run_bytes_ = 0;
  uint64_t max_aligned_run_bytes_ = 0;
  // [layer * num_experts_ + expert].
  std::vector<ExpertLocation> locations_;
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_INDEX_H_
