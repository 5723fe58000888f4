#include "shared/pack/pack_source.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"

namespace flotilla::pack {

absl::Status CheckPackSource(const PackManifest& manifest,
                             const std::string& model_dir,
                             const std::string& pack_dir) {
  // A stamp that cannot be computed (a shard gone) falls through to the
  // full open, whose error names what is missing.
  absl::StatusOr<std::string> stamp =
      model::CheckpointStamp(model_dir, manifest.source_shards);
  if (stamp.ok() && *stamp == manifest.source_stamp) return absl::OkStatus();
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(const std::string fingerprint,
                            model::FingerprintCheckpoint(model_dir, *source));
  if (fingerprint != manifest.source_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pack in ", pack_dir, " was made from checkpoint ",
        manifest.source_fingerprint, " but ", model_dir, " holds checkpoint ",
        fingerprint, "; re-run flotilla-tool pack --model ", model_dir));
  }
  // Same tensors, other bytes (a re-saved index): valid, only slower to
  // open until pack records the new stamp.
  return absl::OkStatus();
}

}  // namespace flotilla::pack
