#include "coordinator/engine.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "coordinator/engine_internal.h"
#include "coordinator/families/kimi_k3/model.h"
#include "coordinator/model/local_experts.h"
#include "coordinator/remote/remote_experts.h"
#include "coordinator/stream/streaming_experts.h"
#include "coordinator/stream/streaming_trunk.h"
#include "coordinator/stream/vocab_stream.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_index.h"
#include "shared/family/kimi_k3/kimi_k3_checkpoint_check.h"
#include "shared/family/kimi_k3/kimi_k3_family.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/memory_budget.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/pack/manifest_trunk_sizes.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/pack_source.h"
#include "shared/pack/region_builder.h"

namespace flotilla::coordinator {
namespace {

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

std::string ConfigPath(const EngineOptions& o) {
  return o.config_path.empty() ? o.model_dir + "/config.json" : o.config_path;
}

std::string ResolvePackDir(const EngineOptions& o) {
  if (!o.pack_dir.empty()) return o.pack_dir;
  const std::string candidate = o.model_dir + "/flotilla-pack";
  return Exists(candidate + "/manifest.json") ? candidate : "";
}

RegionRingOptions PlannedRingOptions(const EngineOptions& o,
                                     const plan::MemoryPlan& plan,
                                     const std::string& pack_dir,
                                     io::ReaderKind reader) {
  RegionRingOptions ro;
  ro.pack_dir = pack_dir;
  ro.pinned_layers = plan.pinned_layers;
  ro.ring_slots = std::max(2, plan.ring_slots);
  ro.verify_checksums = o.verify_checksums;
  ro.reader = reader;
  ro.reader_factory = o.reader_factory;
  // Ring reads go as 4 MiB pieces, two in the kernel at a time: that already
  // reaches a disk's large-read ceiling, and an expert read issued behind
  // them waits for ~8 MB of trunk instead of 64 MB (the measurements behind
  // both: bench/measurements.md). The pinned layers load with the same
  // depth.
  ro.queue_depth = 2;
  ro.chunk_bytes = 4ull << 20;
  return ro;
}

StreamingExpertsOptions PlannedExpertOptions(const EngineOptions& o,
                                             const plan::MemoryPlan& plan,
                                             io::ReaderKind reader) {
  StreamingExpertsOptions eo;
  eo.slots = plan.expert_slots;
  eo.cache_bytes =
      static_cast<uint64_t>(plan.expert_cache_slots) * plan.expert_slot_bytes;
  eo.queue_depth = o.queue_depth;
  eo.reader = reader;
  eo.reader_factory = o.reader_factory;
  eo.verify_checksums = o.verify_checksums;
  return eo;
}

namespace {

// What the open model keeps to find its weights: the expert index when the
// experts are read here (none with expert workers: they index their own).
uint64_t MetadataBytes(const model::ModelShape& shape, const EngineOptions& o,
                       int expert_files) {
  if (!o.workers.empty()) return 0;
  return experts::ExpertIndex::MemoryBytesFor(shape.num_layers,
                                              shape.num_experts, expert_files);
}

// The plan's inputs for the model `c` with trunk regions `t`; `baseline`:
// the process's trimmed RSS before any metadata was read.
plan::PlanInputs Inputs(const family::FamilyConfig& c,
                        const family::TrunkSizes& t, const EngineOptions& o,
                        uint64_t budget, uint64_t baseline, int expert_files) {
  plan::PlanInputs in;
  in.shape = c.Shape();
  in.budget_bytes = budget;
  in.max_context = o.max_context;
  in.sequences = o.sequences;
  in.prefix_cache_bytes = o.prefix_cache_bytes;
  in.prefill_chunk = o.prefill_chunk;
  in.expert_cache_bytes = o.expert_cache_bytes;
  in.disk_bytes_per_second = o.disk_gbps * 1e9;
  in.process_baseline_bytes = baseline;
  in.max_pinned_layers = o.max_pinned_layers;
  in.stream_vocab = o.stream_vocab;
  in.vocab_chunk_bytes =
      io::AlignUp(pack::kVocabChunkRows * t.vocab_row_bytes) +
      io::kDirectIoAlignment;
  in.lm_head_stream_bytes =
      LmHeadStreamBufferBytes(in.shape.vocab_size, t.vocab_row_bytes,
                              pack::kVocabChunkRows, VocabStreamOptions());
  in.metadata_bytes = MetadataBytes(in.shape, o, expert_files);
  in.layer_region_bytes = t.layer_region_bytes;
  in.vocab_region_bytes = t.vocab_region_bytes;
  in.globals_bytes = t.globals_bytes;
  // One aligned read of a run may need an extra 4 KiB when it does not
  // start on a block boundary.
  in.expert_run_bytes =
      io::AlignUp(t.expert_run_bytes) + io::kDirectIoAlignment;
  return in;
}

// From the config alone, as released; one shard per layer and one more
// (what synth writes).
plan::PlanInputs InputsFromConfig(const family::FamilyConfig& c,
                                  const EngineOptions& o, uint64_t budget,
                                  uint64_t baseline) {
  return Inputs(c, family::ReleasedTrunkSizes(c), o, budget, baseline,
                c.num_layers() + 1);
}

absl::StatusOr<plan::PlanInputs> InputsFromManifest(
    const pack::PackManifest& m, const family::FamilyConfig& c,
    const EngineOptions& o, uint64_t budget, uint64_t baseline) {
  FLOTILLA_ASSIGN_OR_RETURN(family::TrunkSizes t,
                            pack::ManifestTrunkSizes(c, m));
  // Runs as the pack recorded them, each read aligned.
  uint64_t slot = 0;
  for (const pack::PackExpert& e : m.experts) {
    slot = std::max(slot, io::AlignForDirectIo(e.offset, e.length).length);
  }
  plan::PlanInputs in = Inputs(c, t, o, budget, baseline,
                               static_cast<int>(m.expert_files.size()));
  in.expert_run_bytes = slot;
  if (!m.expert_format.empty()) in.shape.expert_format = m.expert_format;
  return in;
}

absl::StatusOr<std::unique_ptr<family::FamilyConfig>> LoadConfig(
    const EngineOptions& o, const pack::PackManifest* m) {
  const std::string path = ConfigPath(o);
  if (o.config_path.empty() && m != nullptr && !Exists(path)) {
    return family::ParseFamilyConfig(m->config_json, "pack manifest config");
  }
  return family::LoadFamilyConfig(path);
}

}  // namespace

absl::StatusOr<plan::MemoryPlan> PlanForPack(const EngineOptions& o,
                                             const family::FamilyConfig& c,
                                             const pack::PackManifest& m,
                                             uint64_t budget,
                                             uint64_t baseline) {
  FLOTILLA_ASSIGN_OR_RETURN(plan::PlanInputs in,
                            InputsFromManifest(m, c, o, budget, baseline));
  return plan::MakeMemoryPlan(in);
}

absl::StatusOr<std::unique_ptr<ExpertBackend>> ConnectWorkers(
    const model::MoeSpec& moe, const EngineOptions& o,
    const std::string& fingerprint, const pack::PackManifest* pack) {
  RemoteExpertsOptions ro;
  if (pack != nullptr && pack->experts_in_model_dir && !pack->experts.empty()) {
    ro.expected_checksums.assign(
        static_cast<size_t>(moe.num_layers) * moe.num_experts, 0);
    for (const pack::PackExpert& e : pack->experts) {
      if (e.layer >= 0 && e.layer < moe.num_layers && e.expert >= 0 &&
          e.expert < moe.num_experts) {
        ro.expected_checksums[static_cast<size_t>(e.layer) * moe.num_experts +
                              e.expert] = e.checksum;
      }
    }
  }
  ro.workers = o.workers;
  ro.rpc_deadline_ms = o.rpc_deadline_ms;
  ro.connect_timeout_ms = o.connect_timeout_ms;
  ro.health_interval_ms = o.worker_health_interval_ms;
  ro.tls = o.worker_tls;
  ro.expected_fingerprint = fingerprint;
  FLOTILLA_ASSIGN_OR_RETURN(auto remote, RemoteExperts::Connect(moe, ro));
  return std::unique_ptr<ExpertBackend>(std::move(remote));
}

int ResolveMaxContext(const model::ModelShape& shape, uint64_t budget,
                      int sequences, std::string* reason) {
  constexpr int kDefault = kFallbackContext, kStep = 256;
  const int model = shape.max_positions > 0 ? shape.max_positions : kDefault;
  const uint64_t states = static_cast<uint64_t>(std::max(1, sequences));
  const uint64_t quarter = budget / 4;
  auto fits = [&](int positions) {
    return states * shape.SequenceStateBytes(positions) <= quarter;
  };
  const std::string whose =
      shape.max_positions > 0
          ? absl::StrCat("the model's max_position_embeddings (", model, ")")
          : absl::StrCat("the default ", kDefault,
                         " (config.json gives no max_position_embeddings)");
  if (fits(model)) {
    *reason = whose;
    return model;
  }
  const uint64_t per_position =
      std::max<uint64_t>(1, states * shape.state_bytes_per_position);
  const uint64_t fixed = states * shape.fixed_state_bytes;
  const uint64_t room = quarter > fixed ? quarter - fixed : 0;
  int fit = static_cast<int>(
      std::min<uint64_t>(room / per_position, static_cast<uint64_t>(model)));
  fit -= fit % kStep;
  const int floor = std::min(kDefault, model);
  const int context = std::max(fit, floor);
  *reason = absl::StrCat(whose, " capped so that ", states,
                         " sequence state(s) take at most a "
                         "quarter of the ",
                         budget / 1000000,
                         " MB budget (--max-context sets "
                         "it; --mem and --max-batch change the cap)");
  return context;
}

namespace {

// `o` with max_context 0 resolved for the model `shape` (ResolveMaxContext).
EngineOptions WithContext(const EngineOptions& o,
                          const model::ModelShape& shape, uint64_t budget,
                          std::string* reason) {
  EngineOptions resolved = o;
  if (o.max_context == 0) {
    resolved.max_context =
        ResolveMaxContext(shape, budget, o.sequences, reason);
  } else {
    *reason = "--max-context";
  }
  return resolved;
}

}  // namespace

absl::StatusOr<plan::MemoryPlan> PlanEngine(
    const EngineOptions& options,
    std::unique_ptr<family::FamilyConfig>* config) {
  const uint64_t baseline = io::TrimmedRssBytes();
  FLOTILLA_ASSIGN_OR_RETURN(uint64_t budget, io::ResolveBudget(options.mem));
  EngineOptions o = options;
  const std::string pack = ResolvePackDir(o);
  std::unique_ptr<family::FamilyConfig> c;
  plan::PlanInputs in;
  if (!pack.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(pack::PackManifest m,
                              pack::LoadPackManifest(pack));
    FLOTILLA_ASSIGN_OR_RETURN(c, LoadConfig(o, &m));
    FLOTILLA_RETURN_IF_ERROR(family::CheckLoopBounds(*c, ConfigPath(o)));
    std::string reason;
    o = WithContext(o, c->Shape(), budget, &reason);
    FLOTILLA_ASSIGN_OR_RETURN(in,
                              InputsFromManifest(m, *c, o, budget, baseline));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(c, LoadConfig(o, nullptr));
    FLOTILLA_RETURN_IF_ERROR(family::CheckLoopBounds(*c, ConfigPath(o)));
    std::string reason;
    o = WithContext(o, c->Shape(), budget, &reason);
    in = InputsFromConfig(*c, o, budget, baseline);
  }
  absl::StatusOr<plan::MemoryPlan> plan = plan::MakeMemoryPlan(in);
  if (config != nullptr) *config = std::move(c);
  return plan;
}

namespace {

std::mutex& OpenersMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

// The engine of every family this build runs, by its name in the family
// registry (shared/family): one line each.
std::map<std::string, EngineOpener>& Openers() {
  static auto* openers = new std::map<std::string, EngineOpener>{
      {"deepseek_v3", &OpenDeepSeekV3Engine},
      {"gpt_oss", &OpenGptOssEngine},
      {"kimi_k3", &OpenK3Engine},
      {"mixtral", &OpenMixtralEngine},
      {"qwen3_moe", &OpenQwen3MoeEngine},
  };
  return *openers;
}

// The model's config, of whichever family: from its config.json, or from
// the pack's copy of it when the model folder has none.
absl::StatusOr<std::unique_ptr<family::FamilyConfig>> ModelConfig(
    const EngineOptions& o) {
  if (Exists(ConfigPath(o))) return family::LoadFamilyConfig(ConfigPath(o));
  const std::string pack = ResolvePackDir(o);
  if (pack.empty()) {
    return absl::NotFoundError(absl::StrCat(
        ConfigPath(o), " does not exist and there is no pack beside it"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(pack::PackManifest m, pack::LoadPackManifest(pack));
  return LoadConfig(o, &m);
}

}  // namespace

void RegisterEngineOpener(const std::string& family_name, EngineOpener open) {
  std::lock_guard<std::mutex> lock(OpenersMutex());
  Openers()[family_name] = open;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(
    const EngineOptions& options) {
  FLOTILLA_ASSIGN_OR_RETURN(uint64_t budget, io::ResolveBudget(options.mem));
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<family::FamilyConfig> config,
                            ModelConfig(options));
  std::string reason = "--max-context";
  EngineOptions o = options;
  if (options.max_context == 0) {
    // The shape is only worked out for counts a loop may run over; a config
    // past them keeps the old default and meets its family's own refusal.
    if (family::CheckLoopBounds(*config, ConfigPath(options)).ok()) {
      o = WithContext(options, config->Shape(), budget, &reason);
    } else {
      o.max_context = kFallbackContext;
    }
  }
  const std::string family = config->family().name;
  EngineOpener open = nullptr;
  {
    std::lock_guard<std::mutex> lock(OpenersMutex());
    auto it = Openers().find(family);
    if (it != Openers().end()) open = it->second;
  }
  if (open == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        ConfigPath(o), " is of the ", family,
        " family, which this build plans (generate --plan, flotilla-tool "
        "doctor) but does not run"));
  }
  auto engine = std::make_unique<Engine>();
  engine->family = family;
  engine->config = std::move(config);
  engine->accountant = std::make_unique<io::MemoryAccountant>(budget);
  engine->max_context = o.max_context;
  engine->max_context_reason = reason;
  return open(o, std::move(engine));
}

absl::StatusOr<std::unique_ptr<Engine>> OpenK3Engine(
    const EngineOptions& o, std::unique_ptr<Engine> engine) {
  const uint64_t baseline = io::TrimmedRssBytes();
  const auto* k3_config =
      dynamic_cast<const family::KimiK3Config*>(engine->config.get());
  if (k3_config == nullptr) {
    return absl::InternalError(
        "the kimi_k3 opener got another family's config");
  }
  const model::K3Config& c = k3_config->config();
  const uint64_t budget = engine->accountant->budget();
  engine->pack_dir = ResolvePackDir(o);
  ModelOptions model_options;
  model_options.threads = o.threads;

  if (engine->pack_dir.empty()) {
    // No pack: the whole trunk is built in RAM, which only works when it fits.
    // The checkpoint is checked against the config before anything loops
    // over the config's counts (the plan does).
    FLOTILLA_ASSIGN_OR_RETURN(
        std::unique_ptr<model::SafetensorsCheckpoint> source,
        model::SafetensorsCheckpoint::OpenDir(o.model_dir));
    FLOTILLA_RETURN_IF_ERROR(
        family::kimi_k3::CheckCheckpoint(c, *source, o.model_dir));
    plan::PlanInputs in =
        InputsFromConfig(*k3_config, o, UINT64_MAX / 4, baseline);
    FLOTILLA_ASSIGN_OR_RETURN(engine->plan, plan::MakeMemoryPlan(in));
    engine->plan.budget_bytes = budget;
    uint64_t trunk = 2 * in.vocab_region_bytes + in.globals_bytes;
    for (uint64_t b : in.layer_region_bytes) trunk += b;
    if (!engine->accountant->Charge("trunk.resident", trunk).ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the trunk of ", o.model_dir, " (", trunk / 1e9,
                       " GB) does not fit the memory budget (", budget / 1e9,
                       " GB); run `flotilla-tool pack --model ", o.model_dir,
                       "` to stream it from disk"));
    }
    if (!o.workers.empty()) {
      // Trunk in RAM, routed experts on the workers.
      FLOTILLA_ASSIGN_OR_RETURN(
          const std::string fingerprint,
          model::FingerprintCheckpoint(o.model_dir, *source));
      FLOTILLA_ASSIGN_OR_RETURN(auto experts,
                                ConnectWorkers(c.Moe(), o, fingerprint));
      FLOTILLA_ASSIGN_OR_RETURN(auto trunk, InMemoryTrunk::Build(*source, c));
      std::shared_ptr<model::TensorSource> keep(std::move(source));
      auto k3 = K3Model::FromParts(
          c, std::make_unique<kernels::ThreadPool>(o.threads), std::move(trunk),
          std::move(experts), keep);
      k3->set_expert_lookahead(o.expert_prefetch, o.expert_prefetch_extra);
      engine->model = std::move(k3);
      return engine;
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        engine->model, K3Model::Load(std::move(source), c, model_options));
    return engine;
  }

  FLOTILLA_ASSIGN_OR_RETURN(pack::PackManifest m,
                            pack::LoadPackManifest(engine->pack_dir));
  if (!m.complete) {
    return absl::FailedPreconditionError(
        absl::StrCat("the pack in ", engine->pack_dir,
                     " is incomplete; re-run flotilla-tool pack to finish it"));
  }
  if (m.experts_in_model_dir) {
    // Experts are served in place by absolute offset: refuse a pack made
    // from another checkpoint than the one the model folder holds now.
    FLOTILLA_RETURN_IF_ERROR(
        pack::CheckPackSource(m, o.model_dir, engine->pack_dir));
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      plan::PlanInputs in,
      InputsFromManifest(m, *k3_config, o, budget, baseline));
  FLOTILLA_ASSIGN_OR_RETURN(engine->plan, plan::MakeMemoryPlan(in));
  for (const auto& [owner, bytes] : engine->plan.charges) {
    FLOTILLA_RETURN_IF_ERROR(engine->accountant->Charge(owner, bytes));
  }
  FLOTILLA_ASSIGN_OR_RETURN(io::ReaderKind reader,
                            io::ParseReaderKind(o.reader));
  // The expert backend first: building its index is the one moment the
  // manifest's expert table and the index coexist, and doing it before the
  // trunk's buffers are filled keeps that off the peak. Then the table goes.
  std::unique_ptr<kernels::ThreadPool> pool;
  std::unique_ptr<ExpertBackend> experts;
  if (!o.workers.empty()) {
    // Routed experts on the workers: this machine needs only the pack.
    FLOTILLA_ASSIGN_OR_RETURN(
        experts, ConnectWorkers(c.Moe(), o, m.source_fingerprint, &m));
  } else {
    pool = std::make_unique<kernels::ThreadPool>(o.threads);
    // Expert memory is already charged by the plan above (read buffers and
    // cache), so the backend is not given the accountant.
    StreamingExpertsOptions eo = PlannedExpertOptions(o, engine->plan, reader);
    eo.lookahead = o.expert_prefetch;
    FLOTILLA_ASSIGN_OR_RETURN(
        auto streaming,
        StreamingExperts::Create(o.model_dir, c.Moe(), &m, engine->pack_dir,
                                 pool.get(), eo));
    engine->experts = streaming.get();
    experts = std::move(streaming);
  }
  std::vector<pack::PackExpert>().swap(m.experts);

  StreamingTrunkOptions to;
  to.ring = PlannedRingOptions(o, engine->plan, engine->pack_dir, reader);
  to.lm_head_pinned = engine->plan.lm_head_pinned;
  to.embed_pinned = engine->plan.embed_pinned;
  FLOTILLA_ASSIGN_OR_RETURN(auto trunk, StreamingTrunk::Open(m, c, to));
  engine->trunk = trunk.get();
  engine->streaming = true;
  if (pool == nullptr) pool = std::make_unique<kernels::ThreadPool>(o.threads);
  auto k3 = K3Model::FromParts(c, std::move(pool), std::move(trunk),
                               std::move(experts), nullptr);
  k3->set_expert_lookahead(o.expert_prefetch, o.expert_prefetch_extra);
  engine->model = std::move(k3);
  engine->rss_after_open_bytes = io::TrimmedRssBytes();
  return engine;
}

}  // namespace flotilla::coordinator
