// What this machine computes per second with the engine's own kernels, for
// the per-token prediction of `flotilla-tool doctor` and `generate --plan`.
//
// Why measured, not assumed: with the trunk pinned a decoded token is
// compute-bound (k3-bench at --mem 4G on the 2-vCPU VM: ~0.2 s of compute
// against ~0.1 s of expert reads), and kernel rates vary 3x between SIMD
// levels and with memory bandwidth. Each probe runs the real kernel on
// model-shaped inputs (model::ModelShape, from the model's family): the
// trunk matvecs and the expert matvec in the expert format over weights
// larger than the last-level cache (decode reads every weight once per
// token from RAM), the recurrent state step (Kimi K3's KDA), the
// per-position attention loop, and the checksum that verifies streamed
// bytes.
#ifndef FLOTILLA_SHARED_PLAN_COMPUTE_PROBE_H_
#define FLOTILLA_SHARED_PLAN_COMPUTE_PROBE_H_

#include "absl/status/statusor.h"
#include "shared/model/model_shape.h"
#include "shared/plan/token_time.h"

namespace flotilla::plan {

// About `seconds_per_probe` per figure (5 figures) and ~256 MB of scratch.
absl::StatusOr<ComputeRates> MeasureComputeRates(const model::ModelShape& shape,
                                                 int threads,
                                                 double seconds_per_probe);

// The trunk matvec rate (weight bytes per second) when every matvec takes
// `rows` tokens at once, as a speculative pass's does (1..64 rows).
absl::StatusOr<double> MeasureTrunkRateAtRows(const model::ModelShape& shape,
                                              int threads, int rows,
                                              double seconds);

}  // namespace flotilla::plan

#endif  // FLOTILLA_SHARED_PLAN_COMPUTE_PROBE_H_
