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
  return OpenTypedRegionEngine<family::Qwen3MoeFamilyConfig, Qwen3MoeModel>(
      o, std::move(engine), "qwen3_moe",
      [](const auto& c) { return Qwen3MoeBinder(c); });
}

}  // namespace flotilla::coordinator
