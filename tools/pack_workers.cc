#include "tools/pack_workers.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/config.h"
#include "shared/model/safetensors.h"
#include "shared/model/safetensors_writer.h"
#include "shared/placement/placement.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;

constexpr char kExpertsFile[] = "experts.safetensors";
constexpr char kPlacementFile[] = "placement.json";

// (layer, expert) of an HF routed-expert tensor name
// "...layers.{L}.block_sparse_moe.experts.{e}.{w1,w2,w3}...", else false.
bool ParseExpertName(const std::string& name, int* layer, int* expert) {
  const size_t l = name.find("layers.");
  const size_t e = name.find(".block_sparse_moe.experts.");
  if (l == std::string::npos || e == std::string::npos || l > e) return false;
  const size_t l0 = l + 7, e0 = e + 26;
  const size_t e1 = name.find('.', e0);
  return e1 != std::string::npos &&
         absl::SimpleAtoi(name.substr(l0, e - l0), layer) &&
         absl::SimpleAtoi(name.substr(e0, e1 - e0), expert);
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

// Read-only descriptors of the source shards, shared by the fill threads
// (pread has no file position).
class SourceFiles {
 public:
  ~SourceFiles() {
    for (auto& [path, fd] : fds_) close(fd);
  }
  absl::StatusOr<int> Get(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fds_.find(path);
    if (it != fds_.end()) return it->second;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
    }
    fds_[path] = fd;
    return fd;
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> fds_;
};

}  // namespace

absl::StatusOr<PackWorkersResult> PackWorkers(const PackWorkersOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const std::string config_path = o.model_dir + "/config.json";
  FLOTILLA_ASSIGN_OR_RETURN(model::K3Config config,
                            model::LoadK3Config(config_path));
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(o.model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(const std::string fingerprint,
                            model::FingerprintCheckpoint(o.model_dir, *source));
  if (o.workers < 1 || o.workers > config.num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers ", o.workers, " must be in [1, ",
                     config.num_experts, "] (the experts per layer)"));
  }
  std::vector<int> moe_layers;
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    if (!config.IsDenseLayer(layer)) moe_layers.push_back(layer);
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      placement::Placement placement,
      placement::Placement::Rotate(moe_layers, config.num_experts, o.workers,
                                   o.replicas));
  placement.set_source_fingerprint(fingerprint);
  const std::string config_text = ReadText(config_path);

  // Routed-expert tensors in name order: HF names sort an expert's tensors
  // together (w1.weight_packed, w1.weight_scale, w2..., w3...).
  std::vector<const model::TensorInfo*> tensors;
  for (const std::string& name : source->Names()) {
    int layer = 0, expert = 0;
    if (ParseExpertName(name, &layer, &expert)) {
      tensors.push_back(source->Find(name));
    }
  }
  if (tensors.empty()) {
    return absl::NotFoundError(
        absl::StrCat(o.model_dir, " has no routed-expert tensors"));
  }

  model::SafetensorsWriterOptions wo;
  wo.threads = std::max(1, o.threads);
  FLOTILLA_ASSIGN_OR_RETURN(auto writer, model::SafetensorsWriter::Create(wo));
  SourceFiles files;
  PackWorkersResult result;
  for (int k = 0; k < o.workers; ++k) {
    const std::string folder = absl::StrCat(o.out_dir, "/worker-", k);
    result.folders.push_back(folder);
    placement.set_worker(k);
    const std::string placement_json = placement.ToJson();
    if (ReadText(folder + "/" + kPlacementFile) == placement_json &&
        ReadText(folder + "/config.json") == config_text) {
      ++result.skipped;
      continue;
    }
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", folder, ": ", ec.message()));
    }
    fs::remove(folder + "/" + kPlacementFile,
               ec);  // incomplete until rewritten

    std::vector<model::TensorToWrite> out;
    std::mutex error_mu;
    absl::Status fill_error;  // first read error, guarded by error_mu
    uint64_t bytes = 0;
    for (const model::TensorInfo* t : tensors) {
      int layer = 0, expert = 0;
      ParseExpertName(t->name, &layer, &expert);
      if (!placement.Holds(k, layer, expert)) continue;
      FLOTILLA_ASSIGN_OR_RETURN(const int fd, files.Get(t->file));
      bytes += t->nbytes;
      model::TensorToWrite w;
      w.name = t->name;
      w.dtype = t->dtype;
      w.shape = t->shape;
      const uint64_t base = t->offset;
      const std::string file = t->file;
      w.fill = [fd, base, file, &error_mu, &fill_error](
                   uint64_t offset, uint64_t size, uint8_t* dst) {
        uint64_t done = 0;
        while (done < size) {
          const ssize_t n = pread(fd, dst + done, size - done,
                                  static_cast<off_t>(base + offset + done));
          if (n <= 0) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (fill_error.ok()) {
              fill_error = absl::DataLossError(absl::StrCat(
                  "short read of ", file, " at ", base + offset + done));
            }
            std::memset(dst + done, 0, size - done);
            return;
          }
          done += static_cast<uint64_t>(n);
        }
      };
      out.push_back(std::move(w));
    }
    FLOTILLA_RETURN_IF_ERROR(
        writer->WriteShard(folder + "/" + kExpertsFile, out,
                           {{"flotilla_source_fingerprint", fingerprint}}));
    FLOTILLA_RETURN_IF_ERROR(fill_error);
    FLOTILLA_RETURN_IF_ERROR(WriteText(folder + "/config.json", config_text));
    FLOTILLA_RETURN_IF_ERROR(
        WriteText(folder + "/" + kPlacementFile, placement_json));
    result.bytes += bytes;
    if (o.progress != nullptr) {
      std::fprintf(o.progress,
                   "pack: worker %d/%d: %zu (layer, expert) pairs, %.1f MB "
                   "-> %s\n",
                   k, o.workers, placement.OwnedCount(k), bytes / 1e6,
                   folder.c_str());
    }
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

}  // namespace flotilla::tools
