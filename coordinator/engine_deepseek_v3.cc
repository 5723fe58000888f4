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
  const auto* family =
      dynamic_cast<const family::DeepSeekV3FamilyConfig*>(engine->config.get());
  if (family == nullptr) {
    return absl::InternalError(
        "the deepseek_v3 opener got another family's config");
  }
  const model::DeepSeekV3Config c = family->config();
  return OpenRegionTrunkEngine(
      o, std::move(engine), DeepSeekV3Binder(c),
      [c](std::unique_ptr<RegionTrunk> trunk,
          std::unique_ptr<kernels::ThreadPool> pool,
          std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep) {
        return std::unique_ptr<LanguageModel>(DeepSeekV3Model::Create(
            c, std::move(trunk), std::move(pool), std::move(experts), keep));
      });
}

}  // namespace flotilla::coordinator
