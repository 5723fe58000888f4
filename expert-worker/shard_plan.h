// What an expert worker serves: which experts of which layers (its share of
// the fleet's placement), how much memory and how many threads it may use,
// and the fingerprint of the checkpoint. Built once at start-up from flags
// and the checkpoint folder; immutable afterwards, so safe to read from any
// thread. No gRPC or protobuf here: the server translates this into
// InfoResponse.
#ifndef FLOTILLA_EXPERT_WORKER_SHARD_PLAN_H_
#define FLOTILLA_EXPERT_WORKER_SHARD_PLAN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/model/moe_spec.h"
#include "shared/pack/pack_manifest.h"
#include "shared/placement/expert_split.h"

namespace flotilla::expert_worker {

// Worker `index` of `count`: 0 <= index < count.
struct ShardSpec {
  int index = 0;
  int count = 1;
};

// Parses "K/N" (decimal, 0 <= K < N). InvalidArgument says what is wrong.
absl::StatusOr<ShardSpec> ParseShardSpec(absl::string_view text);

// Parses a byte size: decimal digits with an optional binary suffix K, M, G
// or T (also KiB/KB, ...; all mean powers of 1024), e.g. "8G" = 8 GiB.
// Must be > 0 and fit in 63 bits.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

struct PlanOptions {
  std::string model_dir;  // config.json + *.safetensors (HF or pack --workers)
  // Placement by rule (shared/placement "rotate-v1"): this worker is
  // shard.index of shard.count, every expert held by `replicas` workers.
  // Ignored when placement_file is set, except that a given shard must
  // agree with the file.
  ShardSpec shard;
  bool shard_given = false;  // --shard appeared on the command line
  int replicas = 1;
  // A placement JSON file (shared/placement/placement.h); its "worker"
  // names this worker, else shard.index does.
  std::string placement_file;
  // A split.json (`pack --workers N --split`): the folder holds row slices
  // of every expert. Excludes placement_file and shard / replicas.
  std::string split_file;
  uint64_t memory_budget_bytes = 0;
  int compute_threads = 1;
};

struct ShardPlan {
  ShardSpec shard;        // this worker's index and the fleet's size
  int replicas = 1;       // holders per expert in the fleet
  std::string placement;  // "rotate-v1", or the placement / split file's path
  // Split workers: the slice of every expert this worker holds (then
  // owned_experts lists every expert of every MoE layer).
  std::optional<placement::ExpertSplit> split;
  std::string model_dir;
  model::MoeSpec config;
  int num_layers = 0;   // decoder layers (num_hidden_layers)
  int num_experts = 0;  // routed experts per MoE layer
  int row_width = 0;    // latent width of expert inputs/outputs (floats)
  // MoE layer index -> sorted experts this worker owns; layers where it owns
  // none are absent.
  std::map<int, std::vector<uint32_t>> owned_experts;
  // model::FingerprintCheckpoint of the source checkpoint: of model_dir, or
  // for a `pack --workers` folder the one its placement.json records.
  std::string model_fingerprint;
  // model_dir/flotilla-pack when it holds a complete pack of this very
  // checkpoint (pack::CheckPackSource) serving experts in place: the worker
  // then locates its experts from the pack's expert table instead of
  // parsing every safetensors header. Empty otherwise.
  std::string pack_dir;
  // That pack's manifest, with its expert table cut down to the owned
  // experts (read once, here; ExpertCompute indexes them). Null without
  // pack_dir.
  std::shared_ptr<const pack::PackManifest> pack_manifest;
  uint64_t memory_budget_bytes = 0;  // --mem
  int compute_threads = 1;           // --threads, resolved; >= 1
};

// Reads `options.model_dir`/config.json and the placement, and builds the
// plan. OutOfRange when the shard / replica counts do not fit the model
// (more workers than experts, more replicas than workers) or disagree with
// the placement file; other errors concern the checkpoint or the placement
// file and name the file.
absl::StatusOr<ShardPlan> BuildShardPlan(const PlanOptions& options);

// One line per fact, for logs and for running without --port.
std::string DescribeShardPlan(const ShardPlan& plan);

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_SHARD_PLAN_H_
