// OpenEngine for the gpt-oss family: a RegionTrunk bound by
// GptOssBinder behind the opener every region-trunk family shares
// (engine_region_family.cc).

#include <memory>

#include "coordinator/engine_internal.h"
#include "coordinator/families/gpt_oss/gpt_oss_model.h"
#include "shared/family/gpt_oss/gpt_oss_family.h"

namespace flotilla::coordinator {

absl::StatusOr<std::unique_ptr<Engine>> OpenGptOssEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  return OpenTypedRegionEngine<family::GptOssFamilyConfig, GptOssModel>(
      o, std::move(engine), "gpt_oss",
      [](const auto& c) { return GptOssBinder(c); });
}

}  // namespace flotilla::coordinator
