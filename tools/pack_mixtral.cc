#include "tools/pack_mixtral.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_index.h"
#include "shared/io/checksum.h"
#include "shared/io/file.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/json_util.h"
#include "shared/model/mixtral_config.h"
#include "shared/model/safetensors.h"
#include "shared/pack/mixtral_schema.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/region_builder.h"
#include "tools/pack_io.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;

// Appends `region` at the end of `trunk` (4 KiB aligned already).
void AddRegion(pack::Region region, const std::string& kind, int layer,
               std::string* trunk, pack::PackManifest* m) {
  pack::PackRegion r;
  r.kind = kind;
  r.layer = layer;
  r.offset = trunk->size();
  r.size = region.layout.size;
  r.checksum = io::Checksum64(region.bytes.data(), region.layout.size);
  r.layout = std::move(region.layout);
  trunk->append(reinterpret_cast<const char*>(region.bytes.data()), r.size);
  m->regions.push_back(std::move(r));
}

}  // namespace

absl::StatusOr<PackResult> PackMixtral(const PackOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::string config_path = options.model_dir + "/config.json";
  FLOTILLA_ASSIGN_OR_RETURN(std::string config_text,
                            model::internal::ReadSmallFile(config_path));
  FLOTILLA_ASSIGN_OR_RETURN(nlohmann::json root, model::internal::ParseJson(
                                                     config_text, config_path));
  FLOTILLA_ASSIGN_OR_RETURN(model::MixtralConfig c,
                            model::ParseMixtralConfig(root, config_path));
  FLOTILLA_ASSIGN_OR_RETURN(
      auto ckpt, model::SafetensorsCheckpoint::OpenDir(options.model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(const std::string dir, MakePackDir(options));
  pack::PackManifest m;
  FLOTILLA_ASSIGN_OR_RETURN(
      m.source_fingerprint,
      model::FingerprintCheckpoint(options.model_dir, *ckpt));
  m.source_shards = model::CheckpointShards(options.model_dir, *ckpt);
  FLOTILLA_ASSIGN_OR_RETURN(
      m.source_stamp,
      model::CheckpointStamp(options.model_dir, m.source_shards));
  m.config_json = config_text;
  std::string trunk;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r,
        pack::BuildRegion(*ckpt, pack::MixtralLayerSchema(c, layer)));
    AddRegion(std::move(r), "layer", layer, &trunk, &m);
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      pack::Region globals,
      pack::BuildRegion(*ckpt, pack::MixtralGlobalsSchema(c)));
  AddRegion(std::move(globals), "globals", -1, &trunk, &m);
  for (const bool head : {false, true}) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r,
        pack::BuildRegion(*ckpt, pack::MixtralVocabSchema(c, head)));
    AddRegion(std::move(r), head ? "lm_head" : "embed", -1, &trunk, &m);
  }
  // Experts stay in the safetensors: one run each, checksummed here.
  const model::MoeSpec moe = c.Moe();
  experts::ExpertIndexOptions io;
  io.config = &moe;
  io.max_gap_bytes = 1;  // tiled exactly: the run is the tensors
  FLOTILLA_ASSIGN_OR_RETURN(experts::ExpertIndex index,
                            experts::ExpertIndex::FromTensorSource(*ckpt, io));
  m.expert_format = experts::ExpertFormatName(index.format());
  m.experts_in_model_dir = true;
  for (const std::string& file : index.files()) {
    m.expert_files.push_back(fs::path(file).filename().string());
  }
  // Each shard opened once, not once per expert.
  std::vector<io::File> files;
  for (const std::string& path : index.files()) {
    FLOTILLA_ASSIGN_OR_RETURN(io::File f,
                              io::File::Open(path, /*direct=*/false));
    files.push_back(std::move(f));
  }
  PackResult result;
  std::vector<char> run;
  for (const experts::ExpertKey& key : index.Keys()) {
    const experts::ExpertLocation* loc = index.Find(key);
    run.resize(loc->length);
    FLOTILLA_RETURN_IF_ERROR(
        files[loc->file].ReadAt(loc->offset, run.size(), run.data()));
    pack::PackExpert e;
    e.layer = key.layer;
    e.expert = key.expert;
    e.file = static_cast<int>(loc->file);
    e.offset = loc->offset;
    e.length = loc->length;
    e.checksum = io::Checksum64(run.data(), run.size());
    e.tensor_offsets = loc->tensor_offsets;
    m.experts.push_back(e);
    result.bytes += loc->length;
  }
  m.complete = true;
  FLOTILLA_RETURN_IF_ERROR(
      WriteFileAtomically(dir + "/" + m.trunk_file, trunk));
  FLOTILLA_RETURN_IF_ERROR(WritePackManifest(dir, m));
  result.pack_dir = dir;
  result.units_done = m.regions.size() + m.experts.size();
  result.bytes += trunk.size();
  result.seconds = base::SecondsSince(start);
  return result;
}

}  // namespace flotilla::tools
