// `flotilla-tool doctor`: measures this machine (RAM, the disk's random and
// large-read bandwidth with O_DIRECT) and predicts, for a model, what each
// memory preset would pin and how many seconds a decoded token would take.
//
// Prediction: bytes read per token come from the memory planner
// (shared/plan/memory_plan.h: unpinned trunk layers, the lm_head when not
// pinned, embedding rows, and top_k x MoE layers x expert run). Trunk and
// vocab bytes are charged at the bandwidth of 4 MiB random reads at QD2
// (how the engine streams them); expert bytes
// at the bandwidth of expert-sized random reads at QD32 (the engine issues
// a step's expert reads together, up to --queue-depth 32). The disk
// figures come from io::ProbeRandomReads, which agrees with fio (see
// docs/streaming.md). Compute comes from this machine's kernel rates
// (shared/plan/compute_probe.h), and plan::PredictTokenTime overlaps the
// two as the engine does.
#ifndef FLOTILLA_TOOLS_DOCTOR_H_
#define FLOTILLA_TOOLS_DOCTOR_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/family/family.h"
#include "shared/io/disk_probe.h"
#include "shared/model/model_shape.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"
#include "shared/plan/memory_plan.h"
#include "shared/plan/token_time.h"

namespace flotilla::tools {

struct DoctorOptions {
  std::string model_dir;  // optional: predict for this model
  // Where to measure the disk; empty: the model dir, else the cwd.
  std::string path;
  double disk_seconds = 3.0;  // timed window per probe
  // Scratch file size when no model shard is large enough to probe.
  uint64_t scratch_bytes = uint64_t{3} << 30;
  int max_context = 4096;  // positions the plan reserves state for
  // Compute: the engine's thread count (0 = all hardware threads, as
  // generate), the cached positions attention is predicted at, and the
  // timed seconds per kernel probe.
  int threads = 0;
  int positions = 256;
  double compute_seconds = 0.3;
  // Budgets predicted besides the presets (--mem 1G,2G).
  std::vector<std::string> budgets;
  // The expert-worker fleet whose per-worker expert reads are shown
  // (--workers; `pack --workers N` placement, no replicas).
  int fleet_workers = 4;
  // Speculative decoding (docs/speculative.md): passes checking `guesses`
  // guesses and yielding `tokens_per_pass` tokens; 0 guesses: plain.
  int guesses = 0;
  double tokens_per_pass = 1;
};

// What a model of any family needs, from its pack manifest, its checkpoint
// headers, or (lacking both) its config alone.
struct ModelSizes {
  std::shared_ptr<const family::FamilyConfig> config;
  // config->Shape(), with the expert format the pack or checkpoint holds.
  model::ModelShape shape;
  std::string source;  // "pack manifest", "checkpoint headers", "config.json"
  std::vector<uint64_t> layer_region_bytes;
  uint64_t vocab_region_bytes = 0;
  uint64_t globals_bytes = 0;
  uint64_t expert_run_bytes = 0;  // the largest expert run
  std::string largest_shard;      // path, empty without shards
  uint64_t largest_shard_bytes = 0;
  std::vector<std::string> shards;  // every *.safetensors, sorted
  uint64_t shard_bytes = 0;         // their total size

  uint64_t trunk_bytes() const;
};

absl::StatusOr<ModelSizes> LoadModelSizes(const std::string& model_dir);

// Reads doctor measures and the figures the prediction uses.
inline constexpr uint64_t kLargeReadBytes = uint64_t{64} << 20;
inline constexpr int kTrunkQueueDepth = 4;  // the disk's large-read ceiling
// How the engine streams trunk regions (coordinator/engine.cc): 4 MiB
// pieces, two in flight. What trunk and vocab bytes are charged at.
inline constexpr uint64_t kTrunkReadBytes = uint64_t{4} << 20;
inline constexpr int kTrunkReadQueueDepth = 2;
inline constexpr int kExpertQueueDepth = 32;  // expert-sized reads

struct DiskProbeSpec {
  uint64_t read_size = 0;
  std::vector<int> queue_depths;
  // Read into 2 MiB pages (io::DiskProbeOptions::huge_pages) instead of the
  // 4 KiB pages the engine's buffers use.
  bool huge_pages = false;
};

struct DiskMeasurements {
  std::vector<std::string> files;  // what was read
  bool scratch = false;            // a file doctor created (and removed)
  std::vector<io::DiskProbeResult> random;  // per read size x queue depth
  std::vector<bool> random_huge;  // per `random`: 2 MiB pages asked for
  // Random-read GB/s for `read_size` at the queue depth closest to `qd`
  // from below, into 4 KiB or 2 MiB pages (0 when not measured).
  double RandomGbPerS(uint64_t read_size, int qd,
                      bool huge_pages = false) const;
  // 64 MiB reads at kTrunkQueueDepth: the disk's large-read ceiling.
  double LargeGbPerS(bool huge_pages = false) const {
    return RandomGbPerS(kLargeReadBytes, kTrunkQueueDepth, huge_pages);
  }
  // The engine's trunk reads: what trunk and vocab bytes are charged at.
  double TrunkGbPerS(bool huge_pages = false) const {
    return RandomGbPerS(kTrunkReadBytes, kTrunkReadQueueDepth, huge_pages);
  }
};

// Probes `probe_files` (model shards, read-only) or, when empty, a scratch
// file of `scratch_bytes` of random data created in `scratch_dir` (and
// removed), with each spec's read size at each of its queue depths, except
// depths above 1 that would keep more than half the files' bytes in flight.
absl::StatusOr<DiskMeasurements> MeasureDisk(
    const std::vector<std::string>& probe_files, const std::string& scratch_dir,
    uint64_t scratch_bytes, const std::vector<DiskProbeSpec>& specs,
    double seconds, FILE* log);

struct Prediction {
  std::string preset;  // "laptop", ..., "auto"
  uint64_t budget_bytes = 0;
  absl::StatusOr<plan::MemoryPlan> plan;
  // Per token: trunk + lm_head + embedding bytes, and expert run bytes.
  uint64_t large_read_bytes = 0;
  uint64_t expert_read_bytes = 0;
  plan::TokenTime time = {};     // compute and reads, overlapped
  double seconds_per_token = 0;  // time.seconds
};

// What else the predictions use: this machine's kernel rates (all zero:
// an I/O-only bound), attention's cached positions, and budgets to predict
// besides the presets, as (label, bytes).
struct ComputeModel {
  plan::ComputeRates rates;  // with speculation, the trunk at `rows` rows
  // Speculation: rows per pass (guesses + 1), the union of their experts
  // (plan::ExpertUnion) and tokens per pass; s/token is a pass's time over
  // tokens_per_pass.
  int rows = 1;
  double expert_union = 1;
  double tokens_per_pass = 1;
  double single_read_gbps = 0;  // one expert read alone (0: expert_gbps)
  int positions = 256;
  std::vector<std::pair<std::string, uint64_t>> budgets;
};

// One prediction per preset, per extra budget and for "auto" =
// `auto_budget`, reading trunk/vocab bytes at `large_gbps` and expert bytes
// at `expert_gbps` (plan::PredictTokenTime).
std::vector<Prediction> PredictPresets(const ModelSizes& sizes,
                                       uint64_t auto_budget, int max_context,
                                       double large_gbps, double expert_gbps,
                                       const ComputeModel& compute = {});

// What each worker of a fleet of `workers` (`pack --workers`, rotate-v1,
// no replicas) reads per token: the placement deals every MoE layer's
// experts out evenly, so a token's top-k per layer lands k / workers on each
// on average, and at most k (or all the worker holds) when routing piles
// onto one worker.
// The largest routed expert's run as `flotilla-tool pack` copies it (its
// tensors back to back) and the experts' format, from `source`'s headers;
// the errors of the expert checker (shared/experts/expert_tensors.h).
absl::StatusOr<std::pair<uint64_t, std::string>> PackedExpertRuns(
    const model::TensorSource& source, const model::MoeSpec& moe);

struct FleetReads {
  int workers = 0;
  int experts_held_per_layer = 0;
  double mean_experts_per_token = 0;
  uint64_t mean_bytes_per_token = 0;
  int most_experts_per_token = 0;
  uint64_t most_bytes_per_token = 0;
};
FleetReads PredictFleetReads(const ModelSizes& sizes, int workers);

// The whole check, printing a report on `out`.
absl::Status RunDoctorChecks(const DoctorOptions& options, FILE* out);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_DOCTOR_H_
