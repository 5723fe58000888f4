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
absl::StatusOr<std::string> PlanReport(const EngineOptions& options,
                                       double expert_disk_gbps,
                                       double single_read_gbps, bool json);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_PLAN_REPORT_H_
