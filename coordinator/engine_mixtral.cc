// OpenEngine for the Mixtral family: its trunk and model behind the opener
// every region-trunk family shares (engine_region_family.cc).

#include <memory>

#include "coordinator/engine_internal.h"
#include "coordinator/families/mixtral/mixtral_model.h"
#include "shared/family/mixtral/mixtral_family.h"

namespace flotilla::coordinator {

absl::StatusOr<std::unique_ptr<Engine>> OpenMixtralEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  const auto* mixtral =
      dynamic_cast<const family::MixtralFamilyConfig*>(engine->config.get());
  if (mixtral == nullptr) {
    return absl::InternalError(
        "the mixtral opener got another family's config");
  }
  const model::MixtralConfig c = mixtral->config();
  auto trunk = std::make_shared<std::unique_ptr<MixtralTrunk>>();
  RegionFamilyHooks hooks;
  hooks.binder = MixtralTrunk::LayerBinder(c);
  hooks.build_in_memory = [c, trunk](const model::TensorSource& source) {
    absl::StatusOr<std::unique_ptr<MixtralTrunk>> t =
        MixtralTrunk::InMemory(source, c);
    if (!t.ok()) return t.status();
    *trunk = std::move(*t);
    return absl::OkStatus();
  };
  hooks.open_streamed = [c, trunk](std::unique_ptr<RegionRing> ring) {
    absl::StatusOr<std::unique_ptr<MixtralTrunk>> t =
        MixtralTrunk::FromLayers(std::move(ring), c);
    if (!t.ok()) return t.status();
    *trunk = std::move(*t);
    return absl::OkStatus();
  };
  hooks.make_model = [c, trunk](std::unique_ptr<kernels::ThreadPool> pool,
                                std::unique_ptr<ExpertBackend> experts,
                                std::shared_ptr<void> keep) {
    return std::unique_ptr<LanguageModel>(MixtralModel::Create(
        c, std::move(*trunk), std::move(pool), std::move(experts), keep));
  };
  return OpenRegionFamilyEngine(o, std::move(engine), hooks);
}

}  // namespace flotilla::coordinator
