// `flotilla-tool pack` for a Mixtral checkpoint: one compute-ready region
// per layer (norms, attention, router) plus globals, embed and lm_head in
// trunk.bin, experts served in place from the safetensors with one XXH3
// checksum per expert run, and manifest.json. The format is Kimi K3's
// (shared/pack) with Mixtral's fields (shared/pack/mixtral_schema.h). A
// Mixtral trunk is small next to its experts (1.6 GB for 8x7B in BF16), so
// it is written in one pass without K3's resumable state.
#ifndef FLOTILLA_TOOLS_PACK_MIXTRAL_H_
#define FLOTILLA_TOOLS_PACK_MIXTRAL_H_

#include "absl/status/statusor.h"
#include "tools/pack.h"

namespace flotilla::tools {

absl::StatusOr<PackResult> PackMixtral(const PackOptions& options);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_MIXTRAL_H_
