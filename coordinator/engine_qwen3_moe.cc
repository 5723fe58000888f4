// OpenEngine for the Qwen3-MoE family: a RegionTrunk bound by
// Qwen3MoeBinder behind the opener every region-trunk family shares
// (engine_region_family.cc).

#include <memory>

#include "coordinator/engine_internal.h"
#include "coordinator/families/qwen3_moe/qwen3_moe_model.h"
#include "shared/family/qwen3_moe/qwen3_moe_family.h"

namespace flotilla::coordinator {

absl::StatusOr<std::unique_ptr<Engine>> OpenQwen3MoeEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  const auto* family =
      dynamic_cast<const family::Qwen3MoeFamilyConfig*>(engine->config.get());
  if (family == nullptr) {
    return absl::InternalError(
        "the qwen3_moe opener got another family's config");
  }
  const model::Qwen3MoeConfig c = family->config();
  return OpenRegionTrunkEngine(
      o, std::move(engine), Qwen3MoeBinder(c),
      [c](std::unique_ptr<RegionTrunk> trunk,
          std::unique_ptr<kernels::ThreadPool> pool,
          std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep) {
        return std::unique_ptr<LanguageModel>(Qwen3MoeModel::Create(
            c, std::move(trunk), std::move(pool), std::move(experts), keep));
      });
}

}  // namespace flotilla::coordinator
