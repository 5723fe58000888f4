// OpenEngine for the Mixtral family. From a pack (`flotilla-tool pack`) it
// follows the memory plan every family shares (shared/plan: pinned prefix,
// the ring of coordinator/stream/region_ring.h, expert read buffers, and a
// cache of every expert when the budget holds them). Without one, the
// trunk is read into RAM and the routed experts are held in memory when
// they fit what is left of the budget, else streamed from the checkpoint's
// safetensors through a few slots. Or the experts run on expert workers
// (--workers).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/engine_internal.h"
#include "coordinator/families/mixtral/mixtral_model.h"
#include "coordinator/model/local_experts.h"
#include "coordinator/stream/region_ring.h"
#include "coordinator/stream/streaming_experts.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_index.h"
#include "shared/family/mixtral/mixtral_family.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/model/tensor_names.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {

absl::StatusOr<std::unique_ptr<Engine>> OpenMixtralEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  const uint64_t baseline = io::TrimmedRssBytes();
  const std::string pack_dir = ResolvePackDir(o);
  const auto* mixtral =
      dynamic_cast<const family::MixtralFamilyConfig*>(engine->config.get());
  if (mixtral == nullptr) {
    return absl::InternalError(
        "the mixtral opener got another family's config");
  }
  const model::MixtralConfig& c = mixtral->config();
  if (o.stream_vocab) {
    // Refused, not ignored: the forward pass reads both whole.
    return absl::InvalidArgumentError(
        "--stream-vocab: the mixtral family keeps its embedding and lm_head "
        "resident (mixtral_model.cc reads them whole)");
  }
  const model::MoeSpec moe = c.Moe();
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(o.model_dir));
  uint64_t expert_bytes = 0, trunk_bytes = 0;
  for (const std::string& name : source->Names()) {
    const model::TensorInfo* info = source->Find(name);
    if (model::IsExpertTensorName(name)) {
      expert_bytes += info->nbytes;
    } else {
      trunk_bytes += info->numel() * sizeof(float);  // held as float32
    }
  }
  // One expert read slot (a run of the checkpoint's own format); a decode
  // step needs top-k of them per layer.
  const uint64_t runs = std::max<uint64_t>(
      1, static_cast<uint64_t>(moe.num_layers - moe.first_moe_layer) *
             moe.num_experts);
  const uint64_t slot =
      experts::ExpertIndex::SlotBytesFor((expert_bytes + runs - 1) / runs);
  std::unique_ptr<MixtralTrunk> trunk;
  pack::PackManifest manifest;
  io::MemoryAccountant& budget = *engine->accountant;
  if (pack_dir.empty()) {
    // Each sequence held at once may grow to the context's K and V rows per
    // layer (float32); charged first, so the trunk and experts take what is
    // left, as the Kimi K3 plan does.
    const uint64_t positions = static_cast<uint64_t>(
        c.max_position_embeddings > 0
            ? std::min(o.max_context, c.max_position_embeddings)
            : o.max_context);
    const uint64_t state = static_cast<uint64_t>(std::max(1, o.sequences)) *
                           positions * c.num_hidden_layers * 2 *
                           c.num_key_value_heads * c.head_dim * sizeof(float);
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
    if (!budget.Charge("trunk.resident", trunk_bytes).ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the trunk of ", o.model_dir, " (", trunk_bytes / 1e6,
          " MB as float32) does not fit the memory budget (",
          budget.budget() / 1e6, " MB); run `flotilla-tool pack --model ",
          o.model_dir, "` to stream it from disk"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(trunk, MixtralTrunk::InMemory(*source, c));
    engine->plan.pinned_layers = c.num_hidden_layers;
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
    // The memory plan every family follows: sequence state, pinned prefix,
    // ring, expert read buffers and cache, as `generate --plan` prints it.
    FLOTILLA_ASSIGN_OR_RETURN(
        engine->plan,
        PlanForPack(o, *mixtral, manifest, budget.budget(), baseline));
    for (const auto& [owner, bytes] : engine->plan.charges) {
      FLOTILLA_RETURN_IF_ERROR(budget.Charge(owner, bytes));
    }
    FLOTILLA_ASSIGN_OR_RETURN(const io::ReaderKind reader,
                              io::ParseReaderKind(o.reader));
    FLOTILLA_ASSIGN_OR_RETURN(
        std::unique_ptr<RegionRing> ring,
        RegionRing::Open(
            manifest, c.num_hidden_layers, MixtralTrunk::LayerBinder(c),
            PlannedRingOptions(o, engine->plan, pack_dir, reader)));
    engine->trunk_layers = ring.get();
    FLOTILLA_ASSIGN_OR_RETURN(trunk,
                              MixtralTrunk::FromLayers(std::move(ring), c));
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
        experts, LocalExperts::Create(source.get(), moe, pool.get(),
                                      /*only_layer=*/-1, /*resident=*/true));
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
  std::shared_ptr<model::TensorSource> keep(std::move(source));
  engine->model = MixtralModel::Create(c, std::move(trunk), std::move(pool),
                                       std::move(experts), keep);
  if (pack_dir.empty()) {
    engine->plan.budget_bytes = budget.budget();
    engine->plan.total_bytes = budget.used();
  } else {
    engine->rss_after_open_bytes = io::TrimmedRssBytes();
  }
  return engine;
}

}  // namespace flotilla::coordinator
