#include "tools/synth.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/safetensors_writer.h"
#include "tools/synth_config.h"
#include "tools/synth_fill.h"
#include "tools/synth_plan.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;

constexpr char kIndexFile[] = "model.safetensors.index.json";
constexpr char kConfigFile[] = "config.json";
// Kept free on the target filesystem beyond the checkpoint itself, so that
// synth never fills a disk to the last block.
constexpr uint64_t kFreeSpaceReserve = uint64_t{256} << 20;

std::vector<model::TensorToWrite> ToWrite(const SynthShard& shard,
                                          const uint64_t* seed) {
  std::vector<model::TensorToWrite> out;
  out.reserve(shard.tensors.size());
  for (const SynthTensor& t : shard.tensors) {
    out.push_back({t.name, t.dtype, t.shape,
                   seed != nullptr ? MakeSynthFill(t, *seed) : nullptr});
  }
  return out;
}

std::string IndexJson(const std::vector<SynthShard>& shards) {
  // A plain (sorted) object: ordered_json inserts in linear time, far too
  // slow for the real model's 500k names; Hugging Face sorts them too.
  nlohmann::json map = nlohmann::json::object();
  uint64_t total = 0;
  for (const SynthShard& s : shards) {
    for (const SynthTensor& t : s.tensors) {
      map[t.name] = s.file;
      total += t.nbytes();
    }
  }
  // Hugging Face's total_size counts tensor data only, not headers.
  nlohmann::json index = {{"metadata", {{"total_size", total}}},
                          {"weight_map", std::move(map)}};
  return index.dump(1) + "\n";
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path));
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    return absl::DataLossError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

// Files a previous synth run leaves, which --force replaces.
bool IsSynthOutput(const fs::path& p) {
  const std::string name = p.filename().string();
  return p.extension() == ".safetensors" || name == kIndexFile ||
         name == kConfigFile;
}

std::string Gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GB", bytes / 1e9);
  return buf;
}

}  // namespace

absl::StatusOr<std::vector<SynthFile>> PlanSynthFiles(
    const model::K3Config& config, int shards) {
  FLOTILLA_RETURN_IF_ERROR(CheckSynthesizable(config));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<SynthShard> plan,
                            PlanSynthCheckpoint(config, shards));
  std::vector<SynthFile> files;
  for (const SynthShard& s : plan) {
    FLOTILLA_ASSIGN_OR_RETURN(
        model::ShardLayout layout,
        model::LayoutShard(ToWrite(s, nullptr), {{"format", "pt"}}));
    files.push_back({s.file, layout.file_bytes(), s.tensors.size()});
  }
  files.push_back({kIndexFile, IndexJson(plan).size(), 0});
  files.push_back({kConfigFile, NestedConfigJson(config).size(), 0});
  return files;
}

absl::Status PrepareOutDir(const std::string& dir, bool force,
                           uint64_t need_bytes) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (!fs::create_directories(dir, ec) || ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", dir, ": ", ec.message()));
    }
  } else if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  std::vector<fs::path> replace;
  uint64_t reclaim = 0;
  size_t entries = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    ++entries;
    if (it->is_regular_file(ec) && IsSynthOutput(it->path())) {
      replace.push_back(it->path());
      reclaim += it->file_size(ec);
    }
  }
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot list ", dir, ": ", ec.message()));
  }
  if (entries > 0 && !force) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not empty (", entries,
                     " entries); pass --force to overwrite"));
  }
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot statvfs ", dir));
  }
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (avail + reclaim < need_bytes + kFreeSpaceReserve) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "not enough disk space in ", dir, ": the checkpoint needs ", need_bytes,
        " bytes (", Gb(need_bytes), ") plus ", Gb(kFreeSpaceReserve),
        " headroom; ", Gb(avail), " free", reclaim ? " + " : "",
        reclaim ? Gb(reclaim) + " in files --force replaces" : ""));
  }
  for (const fs::path& p : replace) {
    if (!fs::remove(p, ec) || ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot remove ", p.string(), ": ", ec.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteSynthConfig(const model::K3Config& config,
                              const std::string& dir) {
  return WriteTextFile(dir + "/" + kConfigFile, NestedConfigJson(config));
}

absl::StatusOr<SynthResult> WriteSynthCheckpoint(const SynthOptions& o) {
  using Clock = std::chrono::steady_clock;
  FLOTILLA_RETURN_IF_ERROR(CheckSynthesizable(o.config));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<SynthShard> plan,
                            PlanSynthCheckpoint(o.config, o.shards));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<SynthFile> files,
                            PlanSynthFiles(o.config, o.shards));
  uint64_t total = 0;
  for (const SynthFile& f : files) total += f.bytes;

  model::SafetensorsWriterOptions wo;
  wo.threads =
      o.threads > 0
          ? o.threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  wo.direct_io = o.direct_io;
  // Big buffers amortise syscalls and thread hand-offs; small checkpoints
  // get small ones so that they do not pay to fault in 192 MB.
  wo.buffer_bytes = o.buffer_bytes > 0
                        ? o.buffer_bytes
                        : std::clamp<uint64_t>(total / 8, uint64_t{1} << 20,
                                               uint64_t{64} << 20);
  FLOTILLA_ASSIGN_OR_RETURN(auto writer, model::SafetensorsWriter::Create(wo));

  const auto start = Clock::now();
  std::atomic<int> shard_no{0};
  auto progress = [&] {
    SynthProgress p;
    p.bytes_done = writer->bytes_written();
    p.bytes_total = total;
    p.shard = shard_no.load();
    p.shards = static_cast<int>(plan.size());
    p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return p;
  };
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread monitor;
  if (o.on_progress) {
    monitor = std::thread([&] {
      std::unique_lock<std::mutex> l(mu);
      const auto interval =
          std::chrono::duration<double>(std::max(0.05, o.progress_interval_s));
      while (!cv.wait_for(l, interval, [&] { return done; })) {
        o.on_progress(progress());
      }
    });
  }
  absl::Status status;
  bool all_direct = true;
  for (size_t i = 0; i < plan.size() && status.ok(); ++i) {
    shard_no.store(static_cast<int>(i + 1));
    status = writer->WriteShard(o.out_dir + "/" + plan[i].file,
                                ToWrite(plan[i], &o.seed), {{"format", "pt"}});
    all_direct = all_direct && writer->used_direct_io();
  }
  if (status.ok()) {
    status = WriteTextFile(o.out_dir + "/" + kIndexFile, IndexJson(plan));
  }
  if (status.ok()) status = WriteSynthConfig(o.config, o.out_dir);
  if (monitor.joinable()) {
    {
      std::lock_guard<std::mutex> l(mu);
      done = true;
    }
    cv.notify_all();
    monitor.join();
  }
  FLOTILLA_RETURN_IF_ERROR(status);
  SynthResult r;
  r.bytes = total;
  r.shards = static_cast<int>(plan.size());
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.direct_io = all_direct;
  if (o.on_progress) {
    SynthProgress p = progress();
    p.bytes_done = total;
    o.on_progress(p);
  }
  return r;
}

}  // namespace flotilla::tools
