// A family's trunk region sizes as a pack's manifest records them: what the
// memory plan pins and streams when the engine opens a pack.
#ifndef FLOTILLA_SHARED_PACK_MANIFEST_TRUNK_SIZES_H_
#define FLOTILLA_SHARED_PACK_MANIFEST_TRUNK_SIZES_H_

#include "absl/status/statusor.h"
#include "shared/family/family.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::pack {

// One region per layer of `config`, "embed" and "globals" (DataLoss naming
// the missing one otherwise), and the largest expert run.
absl::StatusOr<family::TrunkSizes> ManifestTrunkSizes(
    const family::FamilyConfig& config, const PackManifest& manifest);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_MANIFEST_TRUNK_SIZES_H_
