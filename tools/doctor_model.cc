// Model sizes and per-preset predictions for `flotilla-tool doctor`.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_index.h"
#include "shared/experts/expert_tensors.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/memory_budget.h"
#include "shared/model/safetensors.h"
#include "shared/pack/manifest_trunk_sizes.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_builder.h"
#include "tools/doctor.h"

namespace flotilla::tools {
namespace {

// The presets of io::ResolveBudget, smallest first.
constexpr const char* kPresets[] = {"laptop", "desktop", "workstation",
                                    "server"};

void FindLargestShard(const std::string& model_dir, ModelSizes* s) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (entry.path().extension() != ".safetensors") continue;
    const uint64_t size = entry.file_size(ec);
    if (ec) continue;
    s->shards.push_back(entry.path().string());
    s->shard_bytes += size;
    if (size > s->largest_shard_bytes) {
      s->largest_shard_bytes = size;
      s->largest_shard = entry.path().string();
    }
  }
  std::sort(s->shards.begin(), s->shards.end());
}

}  // namespace

uint64_t ModelSizes::trunk_bytes() const {
  uint64_t t = 2 * vocab_region_bytes + globals_bytes;
  for (uint64_t b : layer_region_bytes) t += b;
  return t;
}

absl::StatusOr<ModelSizes> LoadModelSizes(const std::string& model_dir) {
  ModelSizes s;
  FindLargestShard(model_dir, &s);
  family::TrunkSizes t;
  // 1. A finished pack knows the exact region and run sizes.
  absl::StatusOr<pack::PackManifest> m =
      pack::LoadPackManifest(model_dir + "/flotilla-pack");
  if (m.ok()) {
    FLOTILLA_ASSIGN_OR_RETURN(
        s.config, family::ParseFamilyConfig(m->config_json, "pack manifest"));
    FLOTILLA_RETURN_IF_ERROR(
        family::CheckLoopBounds(*s.config, "pack manifest"));
    FLOTILLA_ASSIGN_OR_RETURN(t, pack::ManifestTrunkSizes(*s.config, *m));
    s.source = "pack manifest";
    s.shape = s.config->Shape();
    if (!m->expert_format.empty()) s.shape.expert_format = m->expert_format;
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(
        s.config, family::LoadFamilyConfig(model_dir + "/config.json"));
    FLOTILLA_RETURN_IF_ERROR(
        family::CheckLoopBounds(*s.config, model_dir + "/config.json"));
    s.shape = s.config->Shape();
    // 2. The checkpoint's headers: the regions a pack would make, and the
    // experts' runs as stored.
    absl::StatusOr<std::unique_ptr<model::SafetensorsCheckpoint>> ckpt =
        model::SafetensorsCheckpoint::OpenDir(model_dir);
    absl::StatusOr<family::TrunkSizes> from_ckpt =
        ckpt.ok() ? family::CheckpointTrunkSizes(*s.config, **ckpt)
                  : absl::StatusOr<family::TrunkSizes>(ckpt.status());
    const model::MoeSpec moe = s.config->Moe();
    experts::ExpertIndexOptions io;
    io.config = &moe;
    absl::StatusOr<experts::ExpertIndex> index =
        from_ckpt.ok()
            ? experts::ExpertIndex::FromTensorSource(**ckpt, io)
            : absl::StatusOr<experts::ExpertIndex>(from_ckpt.status());
    if (index.ok()) {
      t = *from_ckpt;
      for (const experts::ExpertKey& key : index->Keys()) {
        t.expert_run_bytes =
            std::max(t.expert_run_bytes, index->Find(key)->length);
      }
      s.shape.expert_format = experts::ExpertFormatName(index->format());
      s.source = "checkpoint headers";
    } else if (from_ckpt.ok()) {
      // The experts are not one run each in place (FP8 releases store the
      // scales apart from the codes, gpt-oss fuses every expert of a layer):
      // a pack copies each into one run of its tensors back to back.
      std::unique_ptr<model::TensorSource> view;
      absl::StatusOr<const model::TensorSource*> experts =
          family::ExpertSourceOf(*s.config, **ckpt, &view);
      if (!experts.ok()) return experts.status();
      absl::StatusOr<std::pair<uint64_t, std::string>> runs =
          PackedExpertRuns(**experts, moe);
      if (!runs.ok()) return runs.status();
      t = *from_ckpt;
      t.expert_run_bytes = runs->first;
      s.shape.expert_format = runs->second;
      s.source = "checkpoint headers (experts as a pack will copy them)";
    } else {
      // 3. The config alone (a machine that does not hold the model): the
      // formats the family's release uses.
      t = family::ReleasedTrunkSizes(*s.config);
      s.source = absl::StrCat("config.json (", s.config->ReleasedFormats(),
                              " assumed)");
    }
  }
  s.layer_region_bytes = t.layer_region_bytes;
  s.vocab_region_bytes = t.vocab_region_bytes;
  s.globals_bytes = t.globals_bytes;
  s.expert_run_bytes = t.expert_run_bytes;
  return s;
}

absl::StatusOr<std::pair<uint64_t, std::string>> PackedExpertRuns(
    const model::TensorSource& source, const model::MoeSpec& moe) {
  uint64_t largest = 0;
  std::string format;
  for (int layer = moe.first_moe_layer; layer < moe.num_layers; ++layer) {
    if (moe.IsDenseLayer(layer)) continue;
    for (int x = 0; x < moe.num_experts; ++x) {
      const experts::ExpertKey key{layer, x};
      FLOTILLA_ASSIGN_OR_RETURN(
          experts::ExpertTensors t,
          experts::CheckExpertTensors(
              experts::FindExpertTensors(source, moe.expert_names, layer, x),
              key));
      uint64_t run = 0;
      for (const model::TensorInfo* p : t.parts) run += p->nbytes;
      largest = std::max(largest, run);
      format = experts::ExpertFormatName(t.format);
    }
  }
  return std::make_pair(largest, format);
}

std::vector<Prediction> PredictPresets(const ModelSizes& sizes,
                                       uint64_t auto_budget, int max_context,
                                       double large_gbps, double expert_gbps,
                                       const ComputeModel& compute) {
  std::vector<std::pair<std::string, uint64_t>> budgets;
  for (const char* p : kPresets) {
    absl::StatusOr<uint64_t> b = io::ResolveBudget(p);
    if (b.ok()) budgets.push_back({p, *b});
  }
  budgets.insert(budgets.end(), compute.budgets.begin(), compute.budgets.end());
  budgets.push_back({"auto", auto_budget});
  const uint64_t baseline = io::TrimmedRssBytes();
  plan::TokenTimeOptions time;
  time.rates = compute.rates;
  time.positions = compute.positions;
  time.trunk_read_bytes_per_s = large_gbps * 1e9;
  time.expert_read_bytes_per_s = expert_gbps * 1e9;
  time.single_read_bytes_per_s = compute.single_read_gbps * 1e9;
  time.rows = compute.rows;
  time.expert_union = compute.expert_union;
  std::vector<Prediction> out;
  for (const auto& [name, budget] : budgets) {
    plan::PlanInputs in;
    in.shape = sizes.shape;
    in.budget_bytes = budget;
    in.layer_region_bytes = sizes.layer_region_bytes;
    in.vocab_region_bytes = sizes.vocab_region_bytes;
    const uint64_t row_bytes =
        sizes.shape.vocab_size > 0
            ? sizes.vocab_region_bytes / sizes.shape.vocab_size
            : 0;
    in.vocab_chunk_bytes = pack::kVocabChunkRows * row_bytes;
    in.globals_bytes = sizes.globals_bytes;
    in.expert_run_bytes =
        io::AlignUp(sizes.expert_run_bytes) + io::kDirectIoAlignment;
    in.max_context = max_context;
    // What generate charges before the weights: its process (about what
    // this one holds, trimmed) and the expert index (engine.cc), so the
    // pinned prefix matches the engine's.
    in.process_baseline_bytes = baseline;
    // A streamed lm_head's two pass buffers, as generate charges them.
    in.lm_head_stream_bytes = plan::LmHeadPassBufferBytes(
        sizes.shape.vocab_size, row_bytes, pack::kVocabChunkRows,
        plan::kLmHeadPassBytes);
    in.metadata_bytes = experts::ExpertIndex::MemoryBytesFor(
        sizes.shape.num_layers, sizes.shape.num_experts,
        std::max<int>(1, static_cast<int>(sizes.shards.size())));
    in.disk_bytes_per_second = large_gbps * 1e9;
    Prediction p{name, budget, plan::MakeMemoryPlan(in)};
    if (p.plan.ok()) {
      const plan::MemoryPlan& plan = *p.plan;
      // Expert reads are charged at the run length actually read (the
      // planner's slot includes alignment slack).
      p.expert_read_bytes = plan.expert_read_bytes /
                            std::max<uint64_t>(in.expert_run_bytes, 1) *
                            sizes.expert_run_bytes;
      p.large_read_bytes = plan.trunk_read_bytes + plan.lm_head_read_bytes +
                           plan.embed_read_bytes;
      // Reads at the run length too.
      plan::MemoryPlan read = plan;
      read.expert_read_bytes = p.expert_read_bytes;
      p.time = plan::PredictTokenTime(sizes.shape, read, time);
      p.seconds_per_token = p.time.seconds / compute.tokens_per_pass;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace flotilla::tools
