// `generate --plan`: the memory plan, and what a decoded token will take
// under it on this machine: the engine's kernels are timed here (about a
// second, plan::MeasureComputeRates) and overlapped with the plan's reads
// at the given disk rates (plan::PredictTokenTime). `flotilla-tool doctor`
// measures those rates and prints the flags to pass.
#ifndef FLOTILLA_COORDINATOR_PLAN_REPORT_H_
#define FLOTILLA_COORDINATOR_PLAN_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/engine.h"

namespace flotilla::coordinator {

// Text (or one JSON object) for `options`; trunk reads at
// options.disk_gbps, expert reads at `expert_disk_gbps`, a lone expert read
// (after a wrong prefetch guess) at `single_read_gbps`.
// With speculation (docs/speculative.md): `guesses` per pass, of which
// the pass yields `tokens_per_pass` tokens (1 .. guesses + 1); the report
// adds the predicted s/token of such passes (plan::TokenTimeOptions::rows).
struct SpeculationPlan {
  int guesses = 0;  // 0: no speculation
  double tokens_per_pass = 1;
};

absl::StatusOr<std::string> PlanReport(const EngineOptions& options,
                                       double expert_disk_gbps,
                                       double single_read_gbps, bool json,
                                       const SpeculationPlan& spec = {});

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_PLAN_REPORT_H_
