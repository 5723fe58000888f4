// flotilla-tool synth as a library: writes a random-weight K3 checkpoint in
// the Hugging Face layout (config.json in the nested released form,
// model.safetensors.index.json, model-0000i-of-0000N.safetensors shards).
// The same seed gives byte-identical files for any thread count.
#ifndef FLOTILLA_TOOLS_SYNTH_H_
#define FLOTILLA_TOOLS_SYNTH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"

namespace flotilla::tools {

struct SynthProgress {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  int shard = 0;  // 1-based shard being written
  int shards = 0;
  double seconds = 0;  // since the first shard started
};

struct SynthOptions {
  model::K3Config config;
  std::string out_dir;
  uint64_t seed = 0;
  int shards = 0;   // 0 = auto (one per layer + one for the model level)
  int threads = 0;  // data generation threads; 0 = hardware threads
  bool direct_io = true;
  size_t buffer_bytes = 0;  // 0 = chosen from the checkpoint size
  // Called every progress_interval_s seconds from a monitor thread, and
  // once at the end.
  std::function<void(const SynthProgress&)> on_progress;
  double progress_interval_s = 1.0;
};

struct SynthFile {
  std::string name;
  uint64_t bytes = 0;
  size_t tensors = 0;
};

// Every file the checkpoint consists of, with exact sizes (headers
// included), without writing anything. Shards first, then the index and
// config.json.
absl::StatusOr<std::vector<SynthFile>> PlanSynthFiles(
    const model::K3Config& config, int shards);

// Checks `dir` can take `need_bytes`: refuses a non-empty directory unless
// `force`, and too little free space (statvfs) counting what --force would
// replace. With `force`, removes the files a previous synth left
// (*.safetensors, the index, config.json); other files are kept. Creates `dir`
// if missing.
absl::Status PrepareOutDir(const std::string& dir, bool force,
                           uint64_t need_bytes);

// Writes config.json only (nested form).
absl::Status WriteSynthConfig(const model::K3Config& config,
                              const std::string& dir);

struct SynthResult {
  uint64_t bytes = 0;  // all files
  int shards = 0;
  double seconds = 0;
  bool direct_io = false;  // whether O_DIRECT was used
};

// Writes the whole checkpoint into an existing directory (see PrepareOutDir).
// config.json is written last, so an interrupted run never leaves a
// directory that looks like a complete model.
absl::StatusOr<SynthResult> WriteSynthCheckpoint(const SynthOptions& options);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_SYNTH_H_
