// The fingerprint of a source checkpoint: a short id recorded in a pack
// manifest (and reported by expert workers) so that a pack, a worker or a
// coordinator refuses to combine bytes from different checkpoints.
//
// It must be cheap — computed at every start, on a 1.56 TB checkpoint — so it
// hashes metadata and a sample of the data: XXH3-64 (seed 0) over
//   "flotilla-checkpoint-fingerprint-v2\n",
//   the config.json bytes (length-prefixed),
//   for every tensor in name order: name, dtype, shape, nbytes, and the shard
//     file's name (relative to the model dir) and absolute data offset,
//   for every shard in name order: its name and size in bytes,
//   "samples", then for every shard in name order 4 blocks of 4 KiB spread
//     evenly over its tensor data (first and last included).
// Integers are hashed as 8-byte little-endian values and strings as a
// length followed by the bytes, so no two inputs share an encoding.
// Offsets and shard names go beyond "what tensors exist": packs serve
// experts in place by absolute offset, so a re-sharded copy of the same
// tensors must not match. The samples tell apart checkpoints of one layout
// with other weights (two synth seeds, a fine-tune: v1 hashed metadata
// only and took them for one). A rewrite of bytes between the samples is
// not detected here; the pack's per-expert and per-region checksums,
// checked on every read, and `pack --verify` catch it.
#ifndef FLOTILLA_SHARED_MODEL_CHECKPOINT_FINGERPRINT_H_
#define FLOTILLA_SHARED_MODEL_CHECKPOINT_FINGERPRINT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/model/tensor_source.h"

namespace flotilla::model {

// 16 lower-case hex digits. `model_dir` holds config.json; `source` is the
// checkpoint opened from that directory (TensorInfo::file names its shards).
absl::StatusOr<std::string> FingerprintCheckpoint(const std::string& model_dir,
                                                  const TensorSource& source);

// The shard files of `source`, relative to `model_dir`, sorted: what a
// pack records so that CheckpointStamp can find them again.
std::vector<std::string> CheckpointShards(const std::string& model_dir,
                                          const TensorSource& source);

// A cheap stand-in for re-fingerprinting at every start. The fingerprint is
// a function of config.json, the index (which shards hold which tensors) and
// each shard's size, safetensors header and data samples; this hashes those
// raw bytes (XXH3-64 of "flotilla-checkpoint-stamp-v2\n", config.json, the
// index or, without one, the directory's *.safetensors names, then each of
// `shards`' name, size and 8 + N header bytes, then "samples" and the same
// data samples as the fingerprint) without parsing them: ~115 MB of reads
// and no allocation per tensor for the real K3, against parsing 497,000
// tensors. Equal stamps imply equal fingerprints; unequal stamps imply
// nothing (a reformatted index), so a caller falls back to
// FingerprintCheckpoint. 16 lower-case hex digits.
absl::StatusOr<std::string> CheckpointStamp(
    const std::string& model_dir, const std::vector<std::string>& shards);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_CHECKPOINT_FINGERPRINT_H_
