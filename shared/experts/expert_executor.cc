#include "shared/experts/expert_executor.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/check.h"
#include "shared/experts/expert_codec.h"
#include "shared/kernels/kernels.h"

namespace flotilla::experts {

namespace {

// Common checks of both factories; `full_inter` is the W2 column count an
// expert must have (its intermediate size).
absl::Status CheckShapes(ExpertFormat format,
                         const std::array<MatrixShape, 3>& shapes,
                         uint64_t full_inter, bool sliced,
                         const model::GluActivation& act) {
  const MatrixShape& w1 = shapes[0];
  const MatrixShape& w2 = shapes[1];
  const MatrixShape& w3 = shapes[2];
  const bool whole = w2.rows == w1.cols && w2.cols == w1.rows;
  const bool slice = w1.rows <= full_inter && w2.cols == full_inter &&
                     w2.rows >= 1 && w2.rows <= w1.cols;
  if (w1.rows == 0 || w1.cols == 0 || w3.rows != w1.rows ||
      w3.cols != w1.cols || !(sliced ? slice : whole)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert shapes w1 [", w1.rows, ",", w1.cols, "], w2 [", w2.rows, ",",
        w2.cols, "], w3 [", w3.rows, ",", w3.cols, "] do not form ",
        sliced
            ? absl::StrCat("a row slice of an expert of intermediate size ",
                           full_inter, " (need w1 = w3 = [I_k,L], w2 = [L_k,",
                           full_inter, "])")
            : "an expert (need w1 = w3 = [I,L], w2 = [L,I])"));
  }
  for (const MatrixShape& m : shapes) {
    absl::Status s = CodecOf(format).check_shape(m.rows, m.cols);
    if (!s.ok()) return s;
  }
  if (act.swiglu_limit > 0) {
    if (!std::isfinite(act.swiglu_limit) || !std::isfinite(act.swiglu_alpha)) {
      return absl::InvalidArgumentError(
          absl::StrCat("clamped SwiGLU limit ", act.swiglu_limit, " and alpha ",
                       act.swiglu_alpha, " must be finite"));
    }
  } else if (!(act.gate_clamp > 0) || !(act.up_clamp > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SiTU betas must be positive, got ", act.gate_clamp,
                     " and ", act.up_clamp));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExpertExecutor>> ExpertExecutor::ForShapes(
    ExpertFormat format, const std::array<MatrixShape, 3>& shapes,
    const model::GluActivation& act, kernels::ThreadPool* pool) {
  absl::Status s =
      CheckShapes(format, shapes, shapes[0].rows, /*sliced=*/false, act);
  if (!s.ok()) return s;
  return std::unique_ptr<ExpertExecutor>(
      new ExpertExecutor(format, shapes, act, pool));
}

absl::StatusOr<std::unique_ptr<ExpertExecutor>> ExpertExecutor::Create(
    const ExpertIndex& index, const model::GluActivation& act,
    kernels::ThreadPool* pool) {
  return ForShapes(index.format(),
                   {index.shape(0), index.shape(1), index.shape(2)}, act, pool);
}

absl::StatusOr<std::unique_ptr<ExpertExecutor>> ExpertExecutor::CreateSliced(
    const ExpertIndex& index, uint64_t full_inter,
    const model::GluActivation& act, kernels::ThreadPool* pool) {
  const std::array<MatrixShape, 3> shapes = {index.shape(0), index.shape(1),
                                             index.shape(2)};
  absl::Status s =
      CheckShapes(index.format(), shapes, full_inter, /*sliced=*/true, act);
  if (!s.ok()) return s;
  return std::unique_ptr<ExpertExecutor>(
      new ExpertExecutor(index.format(), shapes, act, pool));
}

void ExpertExecutor::Apply(int which, const ExpertLocation& loc,
                           const uint8_t* run, const float* x, size_t n,
                           float* y) {
  const ExpertCodec& codec = CodecOf(format_);
  const uint8_t* part[3] = {};
  for (int p = 0; p < codec.parts; ++p) {
    part[p] = run + loc.tensor_offsets[codec.parts * which + p];
  }
  codec.matmul(part, shapes_[which], x, n, y, pool_, &dense_copy_);
}

void ExpertExecutor::Compute(const ExpertLocation& loc, const uint8_t* run,
                             const float* x, size_t n, float* y) {
  FLOTILLA_CHECK(!sliced());  // sliced executors: GateUp and Down
  if (n == 0) return;
  if (act_.size() < n * inter_) act_.resize(n * inter_);
  // Same sequence as the reference: gate, up, activation, down.
  GateUp(loc, run, x, n, act_.data());
  Apply(1, loc, run, act_.data(), n, y);
}

void ExpertExecutor::GateUp(const ExpertLocation& loc, const uint8_t* run,
                            const float* x, size_t n, float* act) {
  if (n == 0) return;
  if (h1_.size() < n * inter_) {
    h1_.resize(n * inter_);
    h3_.resize(n * inter_);
  }
  Apply(0, loc, run, x, n, h1_.data());
  Apply(2, loc, run, x, n, h3_.data());
  if (act_kind_.swiglu_limit > 0) {
    kernels::ClampedSwiglu(h1_.data(), h3_.data(), n * inter_,
                           act_kind_.swiglu_limit, act_kind_.swiglu_alpha, act);
  } else {
    kernels::SituGlu(h1_.data(), h3_.data(), n * inter_, act_kind_.gate_clamp,
                     act_kind_.up_clamp, act);
  }
}

void ExpertExecutor::Down(const ExpertLocation& loc, const uint8_t* run,
                          const float* act, size_t n, float* y) {
  if (n == 0) return;
  Apply(1, loc, run, act, n, y);
}

}  // namespace flotilla::experts
