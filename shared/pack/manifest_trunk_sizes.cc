#include "shared/pack/manifest_trunk_sizes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace flotilla::pack {

absl::StatusOr<family::TrunkSizes> ManifestTrunkSizes(
    const family::FamilyConfig& config, const PackManifest& m) {
  family::TrunkSizes s;
  const int layers = config.num_layers();
  for (int layer = 0; layer < layers; ++layer) {
    const PackRegion* r = m.FindLayer(layer);
    if (r == nullptr) {
      return absl::DataLossError(
          absl::StrCat("pack manifest has no region for layer ", layer));
    }
    s.layer_region_bytes.push_back(r->size);
  }
  const PackRegion* embed = m.FindRegion("embed");
  const PackRegion* globals = m.FindRegion("globals");
  if (embed == nullptr || globals == nullptr) {
    return absl::DataLossError("pack manifest lacks embed/globals regions");
  }
  s.vocab_region_bytes = embed->size;
  s.vocab_row_bytes =
      static_cast<int64_t>(family::MatrixRowBytes(embed->layout));
  s.globals_bytes = globals->size;
  for (const PackExpert& e : m.experts) {
    s.expert_run_bytes = std::max(s.expert_run_bytes, e.length);
  }
  return s;
}

}  // namespace flotilla::pack
