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
  const auto* ds =
      dynamic_cast<const family::DeepSeekV3FamilyConfig*>(engine->config.get());
  if (ds == nullptr) {
    return absl::InternalError(
        "the deepseek_v3 opener got another family's config");
  }
  const model::DeepSeekV3Config c = ds->config();
  auto trunk = std::make_shared<std::unique_ptr<RegionTrunk>>();
  RegionFamilyHooks hooks;
  hooks.binder = DeepSeekV3Binder(c);
  hooks.build_in_memory =
      [ds, trunk, binder = hooks.binder](const model::TensorSource& source) {
        absl::StatusOr<std::unique_ptr<RegionTrunk>> t =
            RegionTrunk::InMemory(source, *ds, binder);
        if (!t.ok()) return t.status();
        *trunk = std::move(*t);
        return absl::OkStatus();
      };
  hooks.open_streamed = [c, trunk](std::unique_ptr<RegionRing> ring) {
    absl::StatusOr<std::unique_ptr<RegionTrunk>> t =
        RegionTrunk::FromLayers(std::move(ring), c.num_hidden_layers);
    if (!t.ok()) return t.status();
    *trunk = std::move(*t);
    return absl::OkStatus();
  };
  hooks.make_model = [c, trunk](std::unique_ptr<kernels::ThreadPool> pool,
                                std::unique_ptr<ExpertBackend> experts,
                                std::shared_ptr<void> keep) {
    return std::unique_ptr<LanguageModel>(DeepSeekV3Model::Create(
        c, std::move(*trunk), std::move(pool), std::move(experts), keep));
  };
  return OpenRegionFamilyEngine(o, std::move(engine), hooks);
}

}  // namespace flotilla::coordinator
