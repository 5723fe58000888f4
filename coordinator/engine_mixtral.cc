// OpenEngine for the Mixtral family. The trunk (attention, norms, routers,
// embeddings) is read into RAM; the routed experts run on expert workers
// (--workers), in memory when the whole checkpoint fits the budget, or
// streamed from the checkpoint's safetensors within it (--mem): only slot
// buffers for the runs being read stay resident.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/engine_internal.h"
#include "coordinator/families/mixtral/mixtral_model.h"
#include "coordinator/model/local_experts.h"
#include "coordinator/stream/streaming_experts.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_index.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/json_util.h"
#include "shared/model/safetensors.h"

namespace flotilla::coordinator {
namespace {

bool IsExpertTensor(const std::string& name) {
  return name.find(".block_sparse_moe.experts.") != std::string::npos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> OpenMixtralEngine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  if (!o.pack_dir.empty()) {
    return absl::UnimplementedError(
        "--pack: packs hold Kimi K3 trunks; a Mixtral model runs from its "
        "Hugging Face folder (experts stream from its safetensors)");
  }
  const std::string path = ConfigPath(o);
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            model::internal::ReadSmallFile(path));
  FLOTILLA_ASSIGN_OR_RETURN(nlohmann::json root,
                            model::internal::ParseJson(text, path));
  FLOTILLA_ASSIGN_OR_RETURN(model::MixtralConfig c,
                            model::ParseMixtralConfig(root, path));
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(o.model_dir));
  uint64_t expert_bytes = 0, trunk_bytes = 0;
  for (const std::string& name : source->Names()) {
    const model::TensorInfo* info = source->Find(name);
    // The trunk is held as float32 whatever its dtype on disk.
    (IsExpertTensor(name) ? expert_bytes : trunk_bytes) +=
        IsExpertTensor(name) ? info->nbytes
                             : info->numel() * sizeof(float);
  }
  io::MemoryAccountant& budget = *engine->accountant;
  if (!budget.Charge("trunk.resident", trunk_bytes).ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the trunk of ", o.model_dir, " (", trunk_bytes / 1e6,
        " MB as float32) does not fit the memory budget (",
        budget.budget() / 1e6, " MB)"));
  }
  auto pool = std::make_unique<kernels::ThreadPool>(o.threads);
  const model::MoeSpec moe = c.Moe();
  std::unique_ptr<ExpertBackend> experts;
  if (!o.workers.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(
        const std::string fingerprint,
        model::FingerprintCheckpoint(o.model_dir, *source));
    FLOTILLA_ASSIGN_OR_RETURN(experts, ConnectWorkers(moe, o, fingerprint));
  } else if (budget.Charge("experts.resident", expert_bytes).ok()) {
    FLOTILLA_ASSIGN_OR_RETURN(experts,
                              LocalExperts::Create(source.get(), moe, pool.get()));
  } else {
    // Stream: as many slots as the rest of the budget holds, at least one
    // layer's top-k (a decode step's reads go out together) and at most
    // what prefill can use.
    const uint64_t slot = experts::ExpertIndex::SlotBytesFor(
        experts::ExpertIndex::RunBytesFor(moe, experts::ExpertFormat::kF32));
    const uint64_t left = budget.available();
    StreamingExpertsOptions so;
    so.slots = static_cast<int>(std::clamp<uint64_t>(
        left / slot, moe.num_experts_per_token, 4 * moe.num_experts));
    so.queue_depth = o.queue_depth;
    FLOTILLA_ASSIGN_OR_RETURN(so.reader, io::ParseReaderKind(o.reader));
    so.reader_factory = o.reader_factory;
    so.verify_checksums = o.verify_checksums;
    if (absl::Status s = budget.Charge("experts.slots", so.slots * slot);
        !s.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the memory budget (", budget.budget() / 1e6, " MB) holds the trunk (",
          trunk_bytes / 1e6, " MB) but not ", so.slots,
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
  FLOTILLA_ASSIGN_OR_RETURN(
      engine->model, MixtralModel::Load(*keep, c, std::move(pool),
                                        std::move(experts), keep));
  engine->plan.budget_bytes = budget.budget();
  engine->plan.total_bytes = budget.used();
  return engine;
}

}  // namespace flotilla::coordinator
