// Pieces of OpenEngine shared by the families' openers (engine.cc for Kimi
// K3, engine_region_family.cc for the region-trunk families), and the
// openers themselves.
#ifndef FLOTILLA_COORDINATOR_ENGINE_INTERNAL_H_
#define FLOTILLA_COORDINATOR_ENGINE_INTERNAL_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/engine.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/language_model.h"
#include "coordinator/model/region_trunk.h"
#include "coordinator/stream/region_ring.h"
#include "coordinator/stream/streaming_experts.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {

// Routed experts on the expert workers of `o` (--workers); `fingerprint`
// identifies the checkpoint the coordinator's trunk comes from. With `pack`
// a pack of that checkpoint made in place: its expert checksums are
// compared with those of workers that have one too (ExpertList.checksums).
absl::StatusOr<std::unique_ptr<ExpertBackend>> ConnectWorkers(
    const model::MoeSpec& moe, const EngineOptions& o,
    const std::string& fingerprint, const pack::PackManifest* pack = nullptr);

// The memory plan of `o` over the pack `m` of a model of config `c`, as
// PlanEngine makes it: what every family's opener charges and follows.
absl::StatusOr<plan::MemoryPlan> PlanForPack(const EngineOptions& o,
                                             const family::FamilyConfig& c,
                                             const pack::PackManifest& m,
                                             uint64_t budget,
                                             uint64_t baseline);

// --pack, else <model>/flotilla-pack when it holds a manifest, else "".
std::string ResolvePackDir(const EngineOptions& o);

// The ring and the streamed experts of a pack as `plan` lays them out: what
// every family's opener passes to RegionRing and StreamingExperts.
RegionRingOptions PlannedRingOptions(const EngineOptions& o,
                                     const plan::MemoryPlan& plan,
                                     const std::string& pack_dir,
                                     io::ReaderKind reader);
StreamingExpertsOptions PlannedExpertOptions(const EngineOptions& o,
                                             const plan::MemoryPlan& plan,
                                             io::ReaderKind reader);

// --config, else <model>/config.json.
std::string ConfigPath(const EngineOptions& o);

// What a family whose trunk is pack regions bound by a RegionBinder gives
// the opener they share: the binder (for a pack's streamed layers), how it
// builds its trunk in memory or over the ring, and how it makes its model
// once the routed experts' backend is chosen.
struct RegionFamilyHooks {
  RegionBinder binder;
  std::function<absl::Status(const model::TensorSource& source)>
      build_in_memory;
  std::function<absl::Status(std::unique_ptr<RegionRing> ring)> open_streamed;
  std::function<std::unique_ptr<LanguageModel>(
      std::unique_ptr<kernels::ThreadPool> pool,
      std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep)>
      make_model;
};

// The opener of such a family (engine_region_family.cc): the checkpoint
// checked against the config, the memory plan, the trunk in memory or
// streamed from a pack, and the routed experts resident, streamed or on
// expert workers.
absl::StatusOr<std::unique_ptr<Engine>> OpenRegionFamilyEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine,
    const RegionFamilyHooks& hooks);

// The opener of a family whose trunk is the shared RegionTrunk: the hooks
// made from its layer binder and its model's constructor.
using MakeRegionModel = std::function<std::unique_ptr<LanguageModel>(
    std::unique_ptr<RegionTrunk> trunk,
    std::unique_ptr<kernels::ThreadPool> pool,
    std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep)>;
absl::StatusOr<std::unique_ptr<Engine>> OpenRegionTrunkEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine, RegionBinder binder,
    MakeRegionModel make_model);

// OpenRegionTrunkEngine for a family whose FamilyConfig subclass `Family`
// holds its parsed config (config()), bound by `binder(config)` and modelled
// by `Model::Create(config, trunk, pool, experts, keep)`. InternalError when
// the engine holds another family's config.
template <class Family, class Model, class Binder>
absl::StatusOr<std::unique_ptr<Engine>> OpenTypedRegionEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine, const char* name,
    Binder binder) {
  const auto* family = dynamic_cast<const Family*>(engine->config.get());
  if (family == nullptr) {
    return absl::InternalError(
        std::string("the ") + name + " opener got another family's config");
  }
  const auto c = family->config();
  return OpenRegionTrunkEngine(
      o, std::move(engine), binder(c),
      [c](std::unique_ptr<RegionTrunk> trunk,
          std::unique_ptr<kernels::ThreadPool> pool,
          std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep) {
        return std::unique_ptr<LanguageModel>(Model::Create(
            c, std::move(trunk), std::move(pool), std::move(experts), keep));
      });
}

// The built-in families' EngineOpeners: Kimi K3 (engine.cc), Mixtral
// (engine_mixtral.cc), DeepSeek-V3 / Kimi K2 (engine_deepseek_v3.cc) and
// Qwen3-MoE (engine_qwen3_moe.cc) and gpt-oss (engine_gpt_oss.cc).
absl::StatusOr<std::unique_ptr<Engine>> OpenK3Engine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);
absl::StatusOr<std::unique_ptr<Engine>> OpenMixtralEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);
absl::StatusOr<std::unique_ptr<Engine>> OpenDeepSeekV3Engine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);
absl::StatusOr<std::unique_ptr<Engine>> OpenQwen3MoeEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);
absl::StatusOr<std::unique_ptr<Engine>> OpenGptOssEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_ENGINE_INTERNAL_H_
