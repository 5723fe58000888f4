// Pieces of OpenEngine shared by the families' openers (engine.cc for Kimi
// K3, engine_mixtral.cc for Mixtral), and the openers themselves.
#ifndef FLOTILLA_COORDINATOR_ENGINE_INTERNAL_H_
#define FLOTILLA_COORDINATOR_ENGINE_INTERNAL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/engine.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/stream/region_ring.h"
#include "coordinator/stream/streaming_experts.h"
#include "shared/model/moe_spec.h"
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

// The built-in families' EngineOpeners: Kimi K3 (engine.cc) and Mixtral
// (engine_mixtral.cc).
absl::StatusOr<std::unique_ptr<Engine>> OpenK3Engine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);
absl::StatusOr<std::unique_ptr<Engine>> OpenMixtralEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_ENGINE_INTERNAL_H_
