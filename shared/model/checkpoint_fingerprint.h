// The fingerprint of a source checkpoint: a short id recorded in a pack
// manifest (and reported by expert workers) so that a pack, a worker or a
// coordinator refuses to combine bytes from different checkpoints.
//
// It must be cheap — computed at every start, on a 1.56 TB checkpoint — so it
// hashes metadata only, never tensor data: XXH3-64 (seed 0) over
//   "flotilla-checkpoint-fingerprint-v1\n",
//   the config.json bytes (length-prefixed),
//   for every tensor in name order: name, dtype, shape, nbytes, and the shard
//     file's name (relative to the model dir) and absolute data offset,
//   for every shard in name order: its name and size in bytes.
// Integers are hashed as 8-byte little-endian values and strings as a
// length followed by the bytes, so no two inputs share an encoding.
// Offsets and shard names go beyond "what tensors exist": packs serve
// experts in place by absolute offset, so a re-sharded copy of the same
// tensors must not match. Rewriting a tensor's bytes in place with the same
// metadata is not detected (that is what the manifest's checksums and
// `pack --verify` are for).
#ifndef FLOTILLA_SHARED_MODEL_CHECKPOINT_FINGERPRINT_H_
#define FLOTILLA_SHARED_MODEL_CHECKPOINT_FINGERPRINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "shared/model/tensor_source.h"

namespace flotilla::model {

// 16 lower-case hex digits. `model_dir` holds config.json; `source` is the
// checkpoint opened from that directory (TensorInfo::file names its shards).
absl::StatusOr<std::string> FingerprintCheckpoint(const std::string& model_dir,
                                                  const TensorSource& source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_MODEL_CHECKPOINT_FINGERPRINT_H_
