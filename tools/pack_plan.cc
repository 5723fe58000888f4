#include "tools/pack_plan.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_tensors.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/checksum.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/json_util.h"
#include "shared/model/tensor_names.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::tools {
namespace {

using model::TensorInfo;
using pack::FieldKind;
using pack::FieldSpec;
using pack::RegionField;
using pack::RegionLayout;

// Whether the expert's tensors tile one run of one file; sets the run.
bool Contiguous(PlannedExpert* e) {
  for (const TensorInfo* t : e->tensors) {
    if (t->derived) return false;  // a view's bytes: copied, never in place
  }
  std::vector<const TensorInfo*> byoff = e->tensors;
  std::sort(byoff.begin(), byoff.end(),
            [](const TensorInfo* a, const TensorInfo* b) {
              return a->offset < b->offset;
            });
  for (size_t i = 1; i < byoff.size(); ++i) {
    if (byoff[i]->file != byoff[0]->file ||
        byoff[i]->offset != byoff[i - 1]->offset + byoff[i - 1]->nbytes) {
      return false;
    }
  }
  e->offset = byoff.front()->offset;
  e->length = byoff.back()->offset + byoff.back()->nbytes - e->offset;
  for (size_t i = 0; i < e->tensors.size(); ++i) {
    e->tensor_offsets[i] = e->tensors[i]->offset - e->offset;
  }
  return true;
}

absl::Status PlanExperts(const std::string& model_dir,
                         const model::TensorSource& source, PackPlan* plan) {
  const model::MoeSpec moe = plan->config->Moe();
  bool in_place = true;
  for (int layer = 0; layer < moe.num_layers; ++layer) {
    if (moe.IsDenseLayer(layer)) continue;
    for (int x = 0; x < moe.num_experts; ++x) {
      PlannedExpert e;
      e.layer = layer;
      e.expert = x;
      // The checks every reader of experts makes (expert_tensors.h).
      const experts::ExpertKey key{layer, x};
      FLOTILLA_ASSIGN_OR_RETURN(
          experts::ExpertTensors t,
          experts::CheckExpertTensors(
              experts::FindExpertTensors(source, moe.expert_names, layer, x),
              key));
      FLOTILLA_RETURN_IF_ERROR(experts::CheckExpertShapes(t, moe, key));
      const std::string format = experts::ExpertFormatName(t.format);
      if (plan->expert_format.empty()) plan->expert_format = format;
      if (plan->expert_format != format) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer ", layer, " expert ", x, " is ", format,
                         " but earlier experts are ", plan->expert_format,
                         "; mixed expert formats are not supported"));
      }
      e.tensors = std::move(t.parts);
      in_place = Contiguous(&e) && in_place;
      plan->experts.push_back(std::move(e));
    }
  }
  plan->experts_in_model_dir = in_place;
  plan->expert_bytes = 0;
  if (in_place) {
    std::map<std::string, int> index;
    for (PlannedExpert& e : plan->experts) {
      FLOTILLA_ASSIGN_OR_RETURN(std::string rel,
                                PathRelativeTo(model_dir, e.tensors[0]->file));
      auto [it, added] =
          index.emplace(rel, static_cast<int>(plan->expert_files.size()));
      if (added) plan->expert_files.push_back(rel);
      e.file = it->second;
      plan->expert_bytes += e.length;
    }
    return absl::OkStatus();
  }
  // Copy every expert: canonical tensor order, runs 4 KiB-aligned so each
  // expert is one O_DIRECT read.
  plan->expert_files = {kExpertsFile};
  uint64_t offset = 0;
  for (PlannedExpert& e : plan->experts) {
    e.file = 0;
    e.offset = offset;
    e.length = 0;
    e.tensor_offsets = {};
    for (size_t i = 0; i < e.tensors.size(); ++i) {
      e.tensor_offsets[i] = e.length;
      e.length += e.tensors[i]->nbytes;
    }
    offset = io::AlignUp(offset + e.length);
    plan->expert_bytes += e.length;
  }
  plan->experts_file_bytes = offset;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> PathRelativeTo(const std::string& dir,
                                           const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path(file).lexically_normal().lexically_relative(
      fs::path(dir).lexically_normal());
  if (rel.empty() || *rel.begin() == ".." || rel.is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, " is not inside the model dir ", dir));
  }
  return rel.string();
}

absl::StatusOr<PackPlan> PlanPack(const std::string& model_dir,
                                  const model::TensorSource& source) {
  PackPlan plan;
  FLOTILLA_ASSIGN_OR_RETURN(plan.config_text, model::internal::ReadSmallFile(
                                                  model_dir + "/config.json"));
  FLOTILLA_ASSIGN_OR_RETURN(
      plan.config,
      family::ParseFamilyConfig(plan.config_text, model_dir + "/config.json"));
  FLOTILLA_RETURN_IF_ERROR(plan.config->CheckCheckpoint(source, model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(plan.fingerprint,
                            model::FingerprintCheckpoint(model_dir, source));
  plan.source_shards = model::CheckpointShards(model_dir, source);
  FLOTILLA_ASSIGN_OR_RETURN(
      plan.source_stamp, model::CheckpointStamp(model_dir, plan.source_shards));
  const family::FamilyConfig& c = *plan.config;
  auto add = [&](const std::string& kind, int layer,
                 const std::vector<FieldSpec>& schema) -> absl::Status {
    PlannedRegion r;
    r.kind = kind;
    r.layer = layer;
    r.offset = plan.trunk_bytes;
    FLOTILLA_ASSIGN_OR_RETURN(r.layout, pack::ResolveLayout(source, schema));
    plan.trunk_bytes += r.layout.size;
    plan.regions.push_back(std::move(r));
    return absl::OkStatus();
  };
  const int layers = c.num_layers();
  for (int l = 0; l < layers; ++l) {
    FLOTILLA_RETURN_IF_ERROR(add("layer", l, c.LayerSchema(l)));
  }
  FLOTILLA_RETURN_IF_ERROR(add("embed", -1, c.VocabSchema(false)));
  FLOTILLA_RETURN_IF_ERROR(add("lm_head", -1, c.VocabSchema(true)));
  FLOTILLA_RETURN_IF_ERROR(add("globals", -1, c.GlobalsSchema()));
  std::unique_ptr<model::TensorSource> view;
  FLOTILLA_ASSIGN_OR_RETURN(const model::TensorSource* experts,
                            family::ExpertSourceOf(c, source, &view));
  plan.expert_view = std::move(view);
  FLOTILLA_RETURN_IF_ERROR(PlanExperts(model_dir, *experts, &plan));
  return plan;
}

uint64_t ChunkRowsFor(const std::string& kind) {
  return kind == "embed" || kind == "lm_head" ? pack::kVocabChunkRows : 0;
}

std::vector<uint64_t> ChunkChecksums(const std::string& kind,
                                     const RegionLayout& layout,
                                     const uint8_t* base) {
  std::vector<uint64_t> sums;
  const uint64_t chunk_rows = ChunkRowsFor(kind);
  const RegionField* f = layout.Find("matrix");
  if (chunk_rows == 0 || f == nullptr || f->shape.empty() || f->shape[0] <= 0) {
    return sums;
  }
  const uint64_t rows = f->shape[0], row_bytes = f->nbytes / rows;
  for (uint64_t r = 0; r < rows; r += chunk_rows) {
    const uint64_t n = std::min(chunk_rows, rows - r);
    sums.push_back(
        io::Checksum64(base + f->offset + r * row_bytes, n * row_bytes));
  }
  return sums;
}

pack::PackManifest PackPlan::ToManifest(
    const std::vector<RegionSums>& region_sums,
    const std::vector<uint64_t>& expert_sums, bool complete) const {
  pack::PackManifest m;
  m.source_fingerprint = fingerprint;
  m.source_shards = source_shards;
  m.source_stamp = source_stamp;
  m.config_json = config_text;
  m.trunk_file = kTrunkFile;
  for (size_t i = 0; i < regions.size(); ++i) {
    const PlannedRegion& r = regions[i];
    pack::PackRegion& out = m.regions.emplace_back();
    out.kind = r.kind;
    out.layer = r.layer;
    out.offset = r.offset;
    out.size = r.layout.size;
    out.layout = r.layout;
    out.chunk_rows = ChunkRowsFor(r.kind);
    if (i < region_sums.size()) {
      out.checksum = region_sums[i].checksum;
      out.chunk_checksums = region_sums[i].chunks;
    }
  }
  m.expert_format = expert_format.empty() ? "mxfp4" : expert_format;
  m.experts_in_model_dir = experts_in_model_dir;
  m.expert_files = expert_files;
  m.experts.reserve(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) {
    const PlannedExpert& e = experts[i];
    m.experts.push_back({e.layer, e.expert, e.file, e.offset, e.length,
                         i < expert_sums.size() ? expert_sums[i] : 0,
                         e.tensor_offsets});
  }
  m.complete = complete;
  return m;
}

std::string PackPlan::Id() const {
  const std::string text =
      pack::EncodePackManifest(ToManifest({}, {}, false)).json;
  return io::ChecksumHex(io::Checksum64(text.data(), text.size()));
}

}  // namespace flotilla::tools
