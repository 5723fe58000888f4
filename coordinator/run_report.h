// What `flotilla-coordinator generate` reports about a run: the per-decoded-
// token I/O and timing statistics (--stats, and "stats" in --json), and the
// --dump-logits file.
#ifndef FLOTILLA_COORDINATOR_RUN_REPORT_H_
#define FLOTILLA_COORDINATOR_RUN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/remote/remote_experts.h"
#include "coordinator/stream/streaming_trunk.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator {

// Cumulative counters of an engine at one moment.
struct RunCounters {
  TrunkStats trunk;
  ExpertBackendStats experts;
  std::vector<uint64_t> routed_by_layer;  // ExpertBackend::routed_by_layer
  bool remote = false;  // experts on expert workers (--workers)
  RemoteStats remote_stats;
};

RunCounters SnapshotCounters(const Engine& engine);

// Statistics per decoded token: the difference between the counters `now`
// (taken as the last token was returned) and `at_decode` (taken as the
// first was, right after the prefill), divided by the number of
// decode steps, plus the median step time and the peak RSS. With expert
// workers, a "remote" object holds the decode phase's RPC counters
// (RemoteDecodeStats) and "workers", each worker's since connect
// (WorkerRpcJson).
nlohmann::json DecodeStats(const Engine& engine, const RunCounters& at_decode,
                           const RunCounters& now,
                           const GenerateResult& result);

// The RPC side of RemoteExperts over the decode phase: Compute calls
// (retried, failed), request and response bytes per token, the RPC
// overhead per MoE layer (layer wall minus the slowest worker's own time:
// median, p90, mean, in ms), the busiest worker's share of the expert
// bytes read, and the Prefetch hints sent, failed and dropped.
nlohmann::json RemoteDecodeStats(const RemoteStats& at_decode,
                                 const RemoteStats& now, double steps);

// Per worker, in --workers order, since connect: address, up, Compute
// calls / failed / mean latency, Info probes / failed, times marked down
// (failovers), Prefetch hints sent.
nlohmann::json WorkerRpcJson(const RemoteStats& stats);

// The --json document of one `generate` run: model, prompt and generated
// ids, `text` when the model has a tokenizer (null otherwise), finish
// reason, threads and SIMD level, timings, memory and `stats`
// (DecodeStats).
struct RunSummary {
  std::string model_dir;
  std::vector<int32_t> prompt;
  const std::string* text = nullptr;
  int threads = 0;
  double load_seconds = 0;
  uint64_t trunk_bytes = 0;  // K3Model::resident_trunk_bytes
};
nlohmann::json GenerationJson(const RunSummary& run,
                              const GenerateResult& result,
                              nlohmann::json stats);

// Little-endian float32 [steps][vocab]; row s holds the logits that chose
// generated token s.
absl::Status WriteLogits(const std::string& path, const GenerateResult& result);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_RUN_REPORT_H_
