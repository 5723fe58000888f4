// OpenRegionFamilyEngine: opening a family whose trunk is pack regions bound
// by a RegionBinder (Mixtral, DeepSeek-V3 / Kimi K2). From a pack
// (`flotilla-tool pack`) it follows the memory plan every family shares
// (shared/plan: pinned prefix, the ring of coordinator/stream/region_ring.h,
// expert read buffers, and a cache of every expert when the budget holds
// them). Without one, the trunk is built in RAM and the routed experts are
// held in memory when they fit what is left of the budget, else streamed
// from the checkpoint's safetensors through a few slots. Or the experts run
// on expert workers (--workers).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/engine_internal.h"
#include "coordinator/model/local_experts.h"
#include "coordinator/stream/region_ring.h"
#include "coordinator/stream/streaming_experts.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_index.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/model/tensor_names.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {
namespace {

// Bytes of the routed experts the model runs (the MTP layers' past
// num_layers are not read).
uint64_t RoutedExpertBytes(const model::TensorSource& source,
                           const model::MoeSpec& moe) {
  uint64_t bytes = 0;
  for (const std::string& name : source.Names()) {
    model::ExpertTensorName n;
    if (model::ParseExpertTensorName(name, &n) && n.layer < moe.num_layers) {
      bytes += source.Find(name)->nbytes;
    }
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> OpenRegionFamilyEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine,
    const RegionFamilyHooks& hooks) {
  const uint64_t baseline = io::TrimmedRssBytes();
  const std::string pack_dir = ResolvePackDir(o);
  const family::FamilyConfig& config = *engine->config;
  const std::string& family = config.family().name;
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(o.model_dir));
  // The config against the checkpoint before anything loops over its
  // counts (Shape() walks every layer).
  FLOTILLA_RETURN_IF_ERROR(config.CheckCheckpoint(*source, o.model_dir));
  FLOTILLA_RETURN_IF_ERROR(family::CheckLoopBounds(config, ConfigPath(o)));
  // What the expert readers read: the checkpoint, or the family's view of
  // it (gpt-oss's fused experts cut per expert).
  std::unique_ptr<model::TensorSource> view;
  FLOTILLA_ASSIGN_OR_RETURN(const model::TensorSource* expert_source,
                            family::ExpertSourceOf(config, *source, &view));
  const model::ModelShape shape = config.Shape();
  if (o.stream_vocab && !shape.streams_vocab) {
    // Refused, not ignored: the forward pass reads both whole.
    return absl::InvalidArgumentError(
        absl::StrCat("--stream-vocab: the ", family,
                     " family keeps its embedding and lm_head resident"));
  }
  const model::MoeSpec moe = config.Moe();
  const int layers = config.num_layers();
  const uint64_t expert_bytes = RoutedExpertBytes(*expert_source, moe);
  // One expert read slot (a run of the checkpoint's own format); a decode
  // step needs top-k of them per layer.
  const uint64_t runs = std::max<uint64_t>(
      1, static_cast<uint64_t>(moe.NumMoeLayers()) * moe.num_experts);
  const uint64_t slot =
      experts::ExpertIndex::SlotBytesFor((expert_bytes + runs - 1) / runs);
  pack::PackManifest manifest;
  io::MemoryAccountant& budget = *engine->accountant;
  if (pack_dir.empty()) {
    // Each sequence held at once may grow to the context's state; charged
    // first, so the trunk and experts take what is left, as every plan does.
    const uint64_t positions = static_cast<uint64_t>(
        shape.max_positions > 0 ? std::min(o.max_context, shape.max_positions)
                                : o.max_context);
    const uint64_t state =
        static_cast<uint64_t>(std::max(1, o.sequences)) *
        shape.SequenceStateBytes(static_cast<int>(positions));
    if (absl::Status s = budget.Charge("sequence_state", state); !s.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the memory budget (", budget.budget() / 1e6, " MB) cannot hold the ",
          std::max(1, o.sequences), " sequence state(s) of ", positions,
          " positions (", state / 1e6, " MB); lower --max-context"));
    }
    if (o.prefix_cache_bytes > 0) {
      FLOTILLA_RETURN_IF_ERROR(
          budget.Charge("serve.prefix_cache", o.prefix_cache_bytes));
    }
    // The regions as they will be built: every layer, the globals and the
    // embedding.
    FLOTILLA_ASSIGN_OR_RETURN(const family::TrunkSizes sizes,
                              family::CheckpointTrunkSizes(config, *source));
    // The lm_head is a region of its own unless tied to the embedding.
    const bool tied =
        config.VocabSchema(true)[0].src == config.VocabSchema(false)[0].src;
    uint64_t trunk_bytes =
        sizes.globals_bytes + (tied ? 1 : 2) * sizes.vocab_region_bytes;
    for (uint64_t b : sizes.layer_region_bytes) trunk_bytes += b;
    if (!budget.Charge("trunk.resident", trunk_bytes).ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the trunk of ", o.model_dir, " (", trunk_bytes / 1e6,
          " MB) does not fit the memory budget (", budget.budget() / 1e6,
          " MB); run `flotilla-tool pack --model ", o.model_dir,
          "` to stream it from disk"));
    }
    FLOTILLA_RETURN_IF_ERROR(hooks.build_in_memory(*source));
    engine->plan.pinned_layers = layers;
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(manifest, pack::LoadPackManifest(pack_dir));
    if (!manifest.complete) {
      return absl::FailedPreconditionError(
          absl::StrCat("the pack in ", pack_dir,
                       " is incomplete; re-run flotilla-tool pack"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        const std::string fingerprint,
        model::FingerprintCheckpoint(o.model_dir, *source));
    if (fingerprint != manifest.source_fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the pack in ", pack_dir, " was made from checkpoint ",
          manifest.source_fingerprint, " but ", o.model_dir,
          " holds checkpoint ", fingerprint, "; re-run flotilla-tool pack"));
    }
    // The memory plan every family follows, as `generate --plan` prints it.
    FLOTILLA_ASSIGN_OR_RETURN(
        engine->plan,
        PlanForPack(o, config, manifest, budget.budget(), baseline));
    for (const auto& [owner, bytes] : engine->plan.charges) {
      FLOTILLA_RETURN_IF_ERROR(budget.Charge(owner, bytes));
    }
    FLOTILLA_ASSIGN_OR_RETURN(const io::ReaderKind reader,
                              io::ParseReaderKind(o.reader));
    FLOTILLA_ASSIGN_OR_RETURN(
        std::unique_ptr<RegionRing> ring,
        RegionRing::Open(
            manifest, layers, hooks.binder,
            PlannedRingOptions(o, engine->plan, pack_dir, reader)));
    engine->trunk_layers = ring.get();
    FLOTILLA_RETURN_IF_ERROR(hooks.open_streamed(std::move(ring)));
    engine->pack_dir = pack_dir;
    engine->streaming = true;
  }

  auto pool = std::make_unique<kernels::ThreadPool>(o.threads);
  std::unique_ptr<ExpertBackend> experts;
  if (!o.workers.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(
        const std::string fingerprint,
        model::FingerprintCheckpoint(o.model_dir, *source));
    FLOTILLA_ASSIGN_OR_RETURN(experts, ConnectWorkers(moe, o, fingerprint));
  } else if (!pack_dir.empty()) {
    // The plan's read buffers and cache (every expert, when the budget holds
    // them), already charged; every run checked against the pack's checksum.
    FLOTILLA_ASSIGN_OR_RETURN(const io::ReaderKind reader,
                              io::ParseReaderKind(o.reader));
    FLOTILLA_ASSIGN_OR_RETURN(
        auto streaming, StreamingExperts::Create(
                            o.model_dir, moe, &manifest, pack_dir, pool.get(),
                            PlannedExpertOptions(o, engine->plan, reader)));
    engine->experts = streaming.get();
    experts = std::move(streaming);
  } else if (budget.Charge("experts.resident", expert_bytes).ok()) {
    // Held as charged: read once here, none per token.
    FLOTILLA_ASSIGN_OR_RETURN(
        experts, LocalExperts::Create(expert_source, moe, pool.get(),
                                      /*only_layer=*/-1, /*resident=*/true));
  } else if (view != nullptr) {
    // A view's experts cannot be streamed in place (their bytes are cut
    // from fused tensors): each use reads its expert's cut through the
    // view into one run buffer. `flotilla-tool pack` streams them faster.
    if (absl::Status s = budget.Charge("experts.slots", slot); !s.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the memory budget (", budget.budget() / 1e6,
                       " MB) holds the trunk but not one expert run of ",
                       slot / 1e6, " MB"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        experts, LocalExperts::Create(expert_source, moe, pool.get(),
                                      /*only_layer=*/-1, /*resident=*/false));
    engine->streaming = true;
  } else {
    // Stream from the safetensors: as many slots as the rest of the budget
    // holds, at least one layer's top-k (a decode step's reads go out
    // together) and at most what prefill can use.
    StreamingExpertsOptions so;
    so.slots = static_cast<int>(std::clamp<uint64_t>(budget.available() / slot,
                                                     moe.num_experts_per_token,
                                                     4 * moe.num_experts));
    so.queue_depth = o.queue_depth;
    FLOTILLA_ASSIGN_OR_RETURN(so.reader, io::ParseReaderKind(o.reader));
    so.reader_factory = o.reader_factory;
    so.verify_checksums = o.verify_checksums;
    if (absl::Status s = budget.Charge("experts.slots", so.slots * slot);
        !s.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the memory budget (", budget.budget() / 1e6,
                       " MB) holds the trunk but not ", so.slots,
                       " expert read slots of ", slot / 1e6, " MB"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        auto streaming, StreamingExperts::Create(o.model_dir, moe, nullptr, "",
                                                 pool.get(), so));
    engine->experts = streaming.get();
    engine->streaming = true;
    experts = std::move(streaming);
  }
  // The model keeps the checkpoint and the view over it (destroyed first).
  struct Sources {
    std::unique_ptr<model::SafetensorsCheckpoint> checkpoint;
    std::unique_ptr<model::TensorSource> view;
  };
  auto keep = std::make_shared<Sources>();
  keep->checkpoint = std::move(source);
  keep->view = std::move(view);
  engine->model = hooks.make_model(std::move(pool), std::move(experts), keep);
  if (pack_dir.empty()) {
    engine->plan.budget_bytes = budget.budget();
    engine->plan.total_bytes = budget.used();
  } else {
    engine->rss_after_open_bytes = io::TrimmedRssBytes();
  }
  return engine;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenRegionTrunkEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine, RegionBinder binder,
    MakeRegionModel make_model) {
  const family::FamilyConfig* config = engine->config.get();
  const int layers = config->num_layers();
  auto trunk = std::make_shared<std::unique_ptr<RegionTrunk>>();
  RegionFamilyHooks hooks;
  hooks.binder = binder;
  hooks.build_in_memory = [config, trunk,
                           binder](const model::TensorSource& source) {
    absl::StatusOr<std::unique_ptr<RegionTrunk>> t =
        RegionTrunk::InMemory(source, *config, binder);
    if (!t.ok()) return t.status();
    *trunk = std::move(*t);
    return absl::OkStatus();
  };
  hooks.open_streamed = [layers, trunk](std::unique_ptr<RegionRing> ring) {
    absl::StatusOr<std::unique_ptr<RegionTrunk>> t =
        RegionTrunk::FromLayers(std::move(ring), layers);
    if (!t.ok()) return t.status();
    *trunk = std::move(*t);
    return absl::OkStatus();
  };
  hooks.make_model = [trunk, make_model](
                         std::unique_ptr<kernels::ThreadPool> pool,
                         std::unique_ptr<ExpertBackend> experts,
                         std::shared_ptr<void> keep) {
    return make_model(std::move(*trunk), std::move(pool), std::move(experts),
                      keep);
  };
  return OpenRegionFamilyEngine(o, std::move(engine), hooks);
}

}  // namespace flotilla::coordinator
