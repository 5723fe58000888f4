// OpenEngine for the DeepSeek-V3 / Kimi K2 family: a RegionTrunk bound by
// DeepSeekV3Binder behind the opener every region-trunk family shares
// (engine_region_family.cc).

#include <memory>

#include "coordinator/engine_internal.h"
#include "coordinator/families/deepseek_v3/deepseek_v3_model.h"
#include "shared/family/deepseek_v3/deepseek_v3_family.h"

namespace flotilla::coordinator {

absl::StatusOr<std::unique_ptr<Engine>> OpenDeepSeekV3Engine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  return OpenTypedRegionEngine<family::DeepSeekV3FamilyConfig, DeepSeekV3Model>(
      o, std::move(engine), "deepseek_v3",
      [](const auto& c) { return DeepSeekV3Binder(c); });
}

}  // namespace flotilla::coordinator
