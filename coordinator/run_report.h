// What `flotilla-coordinator generate` reports about a run: the per-decoded-
// token I/O and timing statistics (--stats, and "stats" in --json), and the
// --dump-logits file.
#ifndef FLOTILLA_COORDINATOR_RUN_REPORT_H_
#define FLOTILLA_COORDINATOR_RUN_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "coordinator/engine.h"
#include "coordinator/expert_backend.h"
#include "coordinator/generate.h"
#include "coordinator/streaming_trunk.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator {

// Cumulative counters of an engine at one moment.
struct RunCounters {
  TrunkStats trunk;
  ExpertBackendStats experts;
};

RunCounters SnapshotCounters(const Engine& engine);

// Statistics per decoded token: the difference between the counters now
// and `at_decode` (taken right after the prefill), divided by the number of
// decode steps, plus the median step time and the peak RSS.
nlohmann::json DecodeStats(const Engine& engine, const RunCounters& at_decode,
                           const GenerateResult& result);

// Little-endian float32 [steps][vocab]; row s holds the logits that chose
// generated token s.
absl::Status WriteLogits(const std::string& path, const GenerateResult& result);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_RUN_REPORT_H_
