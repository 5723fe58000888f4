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
  const auto* family =
      dynamic_cast<const family::GptOssFamilyConfig*>(engine->config.get());
  if (family == nullptr) {
    return absl::InternalError(
        "the gpt_oss opener got another family's config");
  }
  const model::GptOssConfig c = family->config();
  return OpenRegionTrunkEngine(
      o, std::move(engine), GptOssBinder(c),
      [c](std::unique_ptr<RegionTrunk> trunk,
          std::unique_ptr<kernels::ThreadPool> pool,
          std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep) {
        return std::unique_ptr<LanguageModel>(GptOssModel::Create(
            c, std::move(trunk), std::move(pool), std::move(experts), keep));
      });
}

}  // namespace flotilla::coordinator
