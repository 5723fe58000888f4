#include "tools/pack_workers.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/open_file.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_checksums.h"
#include "shared/experts/expert_index.h"
#include "shared/family/family.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/io/file.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/model/safetensors_writer.h"
#include "shared/model/tensor_names.h"
#include "shared/placement/expert_split.h"
#include "shared/placement/placement.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;

constexpr char kExpertsFile[] = "experts.safetensors";
constexpr char kPlacementFile[] = "placement.json";
// (layer, expert) of an HF routed-expert tensor name, else false.
bool ParseExpertName(const std::string& name, int* layer, int* expert) {
  model::ExpertTensorName n;
  if (!model::ParseExpertTensorName(name, &n)) return false;
  *layer = n.layer;
  *expert = n.expert;
  return true;
}

// Which matrix of its expert a routed-expert tensor belongs to: 1, 2 or 3
// for w1, w2, w3, else 0.
int ExpertMatrix(const std::string& name) {
  model::ExpertTensorName n;
  return model::ParseExpertTensorName(name, &n) ? n.which + 1 : 0;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename ", tmp, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// The source shards, opened once and shared by the fill threads
// (io::File reads are positioned).
class SourceFiles {
 public:
  absl::StatusOr<const io::File*> Get(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) return &it->second;
    FLOTILLA_ASSIGN_OR_RETURN(io::File f, io::File::OpenRegular(path));
    return &files_.emplace(path, std::move(f)).first->second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, io::File> files_;
};

// The first read error of the fill threads.
class FillErrors {
 public:
  void Record(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) first_ = std::move(s);
  }
  absl::Status first() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }

 private:
  std::mutex mu_;
  absl::Status first_;
};

// Copies bytes [base, base + size) of a source shard.
model::TensorFill ReadFill(const io::File* file, uint64_t base,
                           FillErrors* errors) {
  return [file, base, errors](uint64_t offset, uint64_t size, uint8_t* dst) {
    absl::Status s = file->ReadExact(base + offset, dst, size, "expert bytes");
    if (!s.ok()) {
      errors->Record(std::move(s));
      std::memset(dst, 0, size);
    }
  };
}

// Copies bytes [base, base + size) of a view's derived tensor (gpt-oss's
// per-expert cuts), which exist only through the view's ReadRaw: the tensor
// is read whole at the first call and dropped once `size` bytes are copied.
model::TensorFill ViewFill(const model::TensorSource* view,
                           const model::TensorInfo* t, uint64_t base,
                           uint64_t size, FillErrors* errors) {
  struct Held {
    std::mutex mu;
    std::vector<uint8_t> bytes;
    bool read = false;
    uint64_t copied = 0;
  };
  auto held = std::make_shared<Held>();
  return [=](uint64_t offset, uint64_t n, uint8_t* dst) {
    std::lock_guard<std::mutex> lock(held->mu);
    if (!held->read) {
      held->read = true;
      held->bytes.resize(t->nbytes);
      if (absl::Status s = view->ReadRaw(*t, held->bytes.data()); !s.ok()) {
        errors->Record(std::move(s));
        std::fill(held->bytes.begin(), held->bytes.end(), 0);
      }
    }
    std::memcpy(dst, held->bytes.data() + base + offset, n);
    held->copied += n;
    if (held->copied >= size) {
      held->bytes.clear();
      held->bytes.shrink_to_fit();
    }
  };
}

// What every worker folder is cut from.
struct Source {
  model::MoeSpec config;  // any family's routed experts
  std::string config_text;
  std::unique_ptr<model::SafetensorsCheckpoint> checkpoint;
  // The family's ExpertView of `checkpoint`, when it has one, and what the
  // expert tensors are read from (the view or the checkpoint).
  std::unique_ptr<model::TensorSource> view;
  const model::TensorSource* experts = nullptr;
  std::string fingerprint;
  // Routed-expert tensors in name order: HF names sort an expert's tensors
  // together (w1.weight_packed, w1.weight_scale, w2..., w3...).
  std::vector<const model::TensorInfo*> tensors;
};

// The fill of bytes [begin, begin + size) of expert tensor `t`.
absl::StatusOr<model::TensorFill> TensorBytes(const Source& src,
                                              SourceFiles& files,
                                              const model::TensorInfo* t,
                                              uint64_t begin, uint64_t size,
                                              FillErrors* errors) {
  if (t->derived) return ViewFill(src.experts, t, begin, size, errors);
  FLOTILLA_ASSIGN_OR_RETURN(const io::File* file, files.Get(t->file));
  return ReadFill(file, t->offset + begin, errors);
}

// Creates `folder` and removes its completion markers (both kinds, so a
// folder never claims to be complete while being rewritten, nor claims the
// other layout afterwards).
absl::Status StartFolder(const std::string& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", folder, ": ", ec.message()));
  }
  fs::remove(folder + "/" + kPlacementFile, ec);
  fs::remove(folder + "/" + placement::kSplitFile, ec);
  return absl::OkStatus();
}

// Writes experts.safetensors, config.json and then the marker file.
absl::Status FinishFolder(model::SafetensorsWriter& writer,
                          const std::string& folder, const Source& src,
                          const std::vector<model::TensorToWrite>& out,
                          FillErrors& errors, const char* marker,
                          const std::string& marker_text) {
  FLOTILLA_RETURN_IF_ERROR(
      writer.WriteShard(folder + "/" + kExpertsFile, out,
                        {{"flotilla_source_fingerprint", src.fingerprint}}));
  FLOTILLA_RETURN_IF_ERROR(errors.first());
  // Per-expert checksums, from one read of what was just written, so the
  // worker verifies every expert it reads (shared/experts/expert_checksums).
  {
    FLOTILLA_ASSIGN_OR_RETURN(auto written,
                              model::SafetensorsCheckpoint::OpenDir(folder));
    FLOTILLA_ASSIGN_OR_RETURN(
        experts::ExpertIndex index,
        experts::ExpertIndex::FromTensorSource(*written, {}));
    FLOTILLA_ASSIGN_OR_RETURN(const std::string table,
                              experts::ComputeExpertChecksums(index));
    FLOTILLA_RETURN_IF_ERROR(
        WriteText(folder + "/" + experts::kExpertChecksumsFile, table));
  }
  FLOTILLA_RETURN_IF_ERROR(WriteText(folder + "/config.json", src.config_text));
  return WriteText(folder + "/" + marker, marker_text);
}

// True when `folder` already holds this config and marker text, and the
// checksums (a folder cut before they existed is cut again).
bool FolderDone(const std::string& folder, const Source& src,
                const char* marker, const std::string& marker_text) {
  return ReadText(folder + "/" + marker) == marker_text &&
         ReadText(folder + "/config.json") == src.config_text &&
         fs::exists(folder + "/" + experts::kExpertChecksumsFile);
}

absl::Status PackWhole(const PackWorkersOptions& o, const Source& src,
                       model::SafetensorsWriter& writer, SourceFiles& files,
                       PackWorkersResult& result) {
  const model::MoeSpec& config = src.config;
  if (o.workers < 1 || o.workers > config.num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers ", o.workers, " must be in [1, ",
                     config.num_experts, "] (the experts per layer)"));
  }
  std::vector<int> moe_layers;
  for (int layer = 0; layer < config.num_layers; ++layer) {
    if (!config.IsDenseLayer(layer)) moe_layers.push_back(layer);
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      placement::Placement placement,
      placement::Placement::Rotate(moe_layers, config.num_experts, o.workers,
                                   o.replicas));
  placement.set_source_fingerprint(src.fingerprint);
  for (int k = 0; k < o.workers; ++k) {
    const std::string folder = absl::StrCat(o.out_dir, "/worker-", k);
    result.folders.push_back(folder);
    placement.set_worker(k);
    const std::string placement_json = placement.ToJson();
    if (FolderDone(folder, src, kPlacementFile, placement_json)) {
      ++result.skipped;
      continue;
    }
    FLOTILLA_RETURN_IF_ERROR(StartFolder(folder));
    std::vector<model::TensorToWrite> out;
    FillErrors errors;
    uint64_t bytes = 0;
    for (const model::TensorInfo* t : src.tensors) {
      int layer = 0, expert = 0;
      ParseExpertName(t->name, &layer, &expert);
      if (!placement.Holds(k, layer, expert)) continue;
      bytes += t->nbytes;
      FLOTILLA_ASSIGN_OR_RETURN(
          model::TensorFill fill,
          TensorBytes(src, files, t, 0, t->nbytes, &errors));
      out.push_back({t->name, t->dtype, t->shape, std::move(fill)});
    }
    FLOTILLA_RETURN_IF_ERROR(FinishFolder(writer, folder, src, out, errors,
                                          kPlacementFile, placement_json));
    result.bytes += bytes;
    if (o.progress != nullptr) {
      std::fprintf(o.progress,
                   "pack: worker %d/%d: %zu (layer, expert) pairs, %.1f MB "
                   "-> %s\n",
                   k, o.workers, placement.OwnedCount(k), bytes / 1e6,
                   folder.c_str());
    }
  }
  return absl::OkStatus();
}

absl::Status PackSplit(const PackWorkersOptions& o, const Source& src,
                       model::SafetensorsWriter& writer, SourceFiles& files,
                       PackWorkersResult& result) {
  if (o.replicas != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split takes no --replicas (got ", o.replicas,
                     "): every worker holds a slice of every expert"));
  }
  placement::ExpertSplit split;
  split.workers = o.workers;
  split.intermediate = static_cast<uint64_t>(src.config.intermediate_size);
  split.latent = static_cast<uint64_t>(src.config.hidden_size);
  split.source_fingerprint = src.fingerprint;
  if (absl::Status s = split.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split --workers ", o.workers, ": ", s.message(),
                     " (moe_intermediate_size ", split.intermediate,
                     ", routed_expert_hidden_size ", split.latent, ")"));
  }
  // Every tensor must be a w1/w3 ([I, ...]) or w2 ([L, ...]) matrix, or its
  // rows would not be the rows the slices name.
  std::set<std::pair<int, int>> experts;
  for (const model::TensorInfo* t : src.tensors) {
    if (t->dtype == model::DType::kF8E4M3) {
      // A slice's rows would cut through the 128-row blocks its scales
      // cover; refused rather than sliced wrong.
      return absl::InvalidArgumentError(absl::StrCat(
          "--split: tensor ", t->name,
          " is FP8 with 128x128 block scales, which row slices cannot cut; "
          "use `pack --workers ",
          o.workers, "` without --split"));
    }
    int layer = 0, expert = 0;
    ParseExpertName(t->name, &layer, &expert);
    experts.insert({layer, expert});
    const int which = ExpertMatrix(t->name);
    if (which == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--split: routed-expert tensor ", t->name,
          " is not a w1, w2 or w3 matrix; cannot cut it into row slices"));
    }
    const uint64_t want = which == 2 ? split.latent : split.intermediate;
    if (t->shape.empty() || static_cast<uint64_t>(t->shape[0]) != want ||
        t->nbytes % want != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--split: tensor ", t->name, " has ",
          t->shape.empty() ? int64_t{0} : t->shape[0], " rows, expected ", want,
          which == 2 ? " (routed_expert_hidden_size)"
                     : " (moe_intermediate_size)"));
    }
  }
  for (int k = 0; k < o.workers; ++k) {
    const std::string folder = absl::StrCat(o.out_dir, "/worker-", k);
    result.folders.push_back(folder);
    split.worker = k;
    const std::string split_json = split.ToJson();
    if (FolderDone(folder, src, placement::kSplitFile, split_json)) {
      ++result.skipped;
      continue;
    }
    FLOTILLA_RETURN_IF_ERROR(StartFolder(folder));
    const placement::RowRange inter = split.inter_rows();
    const placement::RowRange latent = split.latent_rows();
    std::vector<model::TensorToWrite> out;
    FillErrors errors;
    uint64_t bytes = 0;
    for (const model::TensorInfo* t : src.tensors) {
      // Row-major: the slice is one contiguous byte range of the tensor.
      const placement::RowRange rows =
          ExpertMatrix(t->name) == 2 ? latent : inter;
      const uint64_t row_bytes = t->nbytes / static_cast<uint64_t>(t->shape[0]);
      std::vector<int64_t> shape = t->shape;
      shape[0] = static_cast<int64_t>(rows.size());
      bytes += rows.size() * row_bytes;
      FLOTILLA_ASSIGN_OR_RETURN(
          model::TensorFill fill,
          TensorBytes(src, files, t, rows.begin * row_bytes,
                      rows.size() * row_bytes, &errors));
      out.push_back({t->name, t->dtype, std::move(shape), std::move(fill)});
    }
    FLOTILLA_RETURN_IF_ERROR(FinishFolder(writer, folder, src, out, errors,
                                          placement::kSplitFile, split_json));
    result.bytes += bytes;
    if (o.progress != nullptr) {
      std::fprintf(o.progress,
                   "pack: worker %d/%d: split slice of %zu (layer, expert) "
                   "pairs (w1/w3 rows [%llu, %llu) of %llu, w2 rows "
                   "[%llu, %llu) of %llu), %.1f MB -> %s\n",
                   k, o.workers, experts.size(),
                   static_cast<unsigned long long>(inter.begin),
                   static_cast<unsigned long long>(inter.end),
                   static_cast<unsigned long long>(split.intermediate),
                   static_cast<unsigned long long>(latent.begin),
                   static_cast<unsigned long long>(latent.end),
                   static_cast<unsigned long long>(split.latent), bytes / 1e6,
                   folder.c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PackWorkersResult> PackWorkers(const PackWorkersOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  Source src;
  const std::string config_path = o.model_dir + "/config.json";
  FLOTILLA_ASSIGN_OR_RETURN(src.config, family::LoadMoeSpec(config_path));
  FLOTILLA_ASSIGN_OR_RETURN(src.checkpoint,
                            model::SafetensorsCheckpoint::OpenDir(o.model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(src.fingerprint, model::FingerprintCheckpoint(
                                                 o.model_dir, *src.checkpoint));
  src.config_text = ReadText(config_path);
  {
    // The family (gpt-oss) may read its experts through a view.
    FLOTILLA_ASSIGN_OR_RETURN(auto family,
                              family::LoadFamilyConfig(config_path));
    FLOTILLA_ASSIGN_OR_RETURN(
        src.experts,
        family::ExpertSourceOf(*family, *src.checkpoint, &src.view));
  }
  src.experts->ForEachTensor([&](const model::TensorInfo& t) {
    int layer = 0, expert = 0;
    if (ParseExpertName(t.name, &layer, &expert)) src.tensors.push_back(&t);
  });
  if (src.tensors.empty()) {
    return absl::NotFoundError(
        absl::StrCat(o.model_dir, " has no routed-expert tensors"));
  }

  model::SafetensorsWriterOptions wo;
  wo.threads = std::max(1, o.threads);
  FLOTILLA_ASSIGN_OR_RETURN(auto writer, model::SafetensorsWriter::Create(wo));
  SourceFiles files;
  PackWorkersResult result;
  FLOTILLA_RETURN_IF_ERROR(o.split ? PackSplit(o, src, *writer, files, result)
                                   : PackWhole(o, src, *writer, files, result));
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

}  // namespace flotilla::tools
