// What an expert worker serves: which experts of which layers (its shard of
// the model), how much memory and how many threads it may use, and the
// fingerprint of the checkpoint. Built once at start-up from flags and the
// checkpoint folder; immutable afterwards, so safe to read from any thread.
// No gRPC or protobuf here: the server translates this into InfoResponse.
#ifndef FLOTILLA_EXPERT_WORKER_SHARD_PLAN_H_
#define FLOTILLA_EXPERT_WORKER_SHARD_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::expert_worker {

// Shard `index` of `count`: 0 <= index < count.
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

// Placement: expert e of every MoE layer belongs to shard e mod count. Same
// experts in every layer keeps the rule trivial to state and check; the
// coordinator does not rely on it (it asks each worker via Info).
std::vector<uint32_t> OwnedExperts(const ShardSpec& shard, int num_experts);

// Fingerprint of the checkpoint in `model_dir`: "cfg-xxh3:<16 hex digits>",
// an XXH3-64 over config.json, model.safetensors.index.json (if present),
// and each *.safetensors file's name, size and JSON header, in name order.
// It tells apart checkpoints of different shape or layout cheaply (no weight
// bytes are read), so it cannot tell two trainings of one layout apart; the
// pack manifest's checksums are the stronger check once pack exists.
absl::StatusOr<std::string> ModelFingerprint(const std::string& model_dir);

struct ShardPlan {
  ShardSpec shard;
  int num_layers = 0;   // decoder layers (num_hidden_layers)
  int num_experts = 0;  // routed experts per MoE layer
  int row_width = 0;    // latent width of expert inputs/outputs (floats)
  // MoE layer index -> sorted experts this worker owns; layers where it owns
  // none are absent.
  std::map<int, std::vector<uint32_t>> owned_experts;
  std::string model_fingerprint;
  uint64_t memory_budget_bytes = 0;  // --mem
  int compute_threads = 1;           // --threads, resolved; >= 1
};

// Reads `model_dir`/config.json and builds the plan. OutOfRange when the
// shard count exceeds num_experts (some shard would own nothing); other
// errors concern the checkpoint (missing or invalid config, unreadable
// safetensors header) and name the file.
absl::StatusOr<ShardPlan> BuildShardPlan(const std::string& model_dir,
                                         const ShardSpec& shard,
                                         uint64_t memory_budget_bytes,
                                         int compute_threads);

// One line per fact, for logs and for running without --port.
std::string DescribeShardPlan(const ShardPlan& plan);

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_SHARD_PLAN_H_
