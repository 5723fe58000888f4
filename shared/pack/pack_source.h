// Whether a model folder still holds the checkpoint a pack was made from.
// Packs that serve experts in place read them by absolute offset from the
// model's shards, so a pack of another checkpoint must be refused; but
// re-fingerprinting parses every header (497,000 tensors for the real K3,
// seconds and hundreds of MB), so the manifest's source_stamp is checked
// first and the full fingerprint only when the stamp differs.
#ifndef FLOTILLA_SHARED_PACK_PACK_SOURCE_H_
#define FLOTILLA_SHARED_PACK_PACK_SOURCE_H_

#include <string>

#include "absl/status/status.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::pack {

// OK when `model_dir` holds the checkpoint `manifest` (in `pack_dir`) was
// packed from; FailedPrecondition naming both fingerprints and saying to
// re-run pack otherwise; the checkpoint's own error when it cannot be read.
absl::Status CheckPackSource(const PackManifest& manifest,
                             const std::string& model_dir,
                             const std::string& pack_dir);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_PACK_SOURCE_H_
