// ExpertExecutor: pure compute of one routed expert on the bytes of its run,
// y = W2 act(W1 x, W3 x) (act: model::GluActivation; with the mxfp4_bias
// format each product adds its matrix's bias), with the kernels' fixed
// reduction orders (so the result does not depend on where the bytes came from,
// the thread count or which other rows are in the batch).
//
// Row slices (placement/expert_split.h): an index of slice runs holds rows
// [a, b) of W1 and W3 and rows [c, d) of W2. GateUp then gives elements
// [a, b) of SiTU(W1 x, W3 x) and Down, applied to the whole activation
// vector, elements [c, d) of y. Each output element is one dot product of
// one matrix row, computed exactly as for the whole expert, so slices
// assembled in row order are bitwise the whole expert's result.
//
// The MXFP4 matrices are used in place (the kernels read packed nibbles and
// scales); dense matrices too, unless a tensor is misaligned for its element
// type inside the buffer (safetensors headers need not be padded), in which
// case it is copied to aligned scratch first.
//
// Thread-compatibility: Compute() mutates scratch buffers, so one thread at a
// time; it parallelises each matrix product over `pool`. Scratch grows to the
// largest row count seen and is then reused (no allocation in steady state).
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_EXECUTOR_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_EXECUTOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/experts/expert_index.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/moe_spec.h"

namespace flotilla::experts {

class ExpertExecutor {
 public:
  // Checks that the index's shapes form an expert: w1 and w3 [I][L], w2
  // [L][I], and that `act` is an activation (positive betas, or a positive
  // swiglu_limit). `pool` may be null (single-threaded); it must outlive the
  // executor.
  static absl::StatusOr<std::unique_ptr<ExpertExecutor>> Create(
      const ExpertIndex& index, const model::GluActivation& act,
      kernels::ThreadPool* pool);
  // The same for experts of `format` and `shapes` (w1, w2, w3) whose bytes
  // do not come from an index (LocalExperts' in-memory tensors).
  static absl::StatusOr<std::unique_ptr<ExpertExecutor>> ForShapes(
      ExpertFormat format, const std::array<MatrixShape, 3>& shapes,
      const model::GluActivation& act, kernels::ThreadPool* pool);
  // For an index of row slices of experts whose intermediate size is
  // `full_inter`: w1 = w3 = [I_k][L] with I_k <= full_inter, w2 = [L_k]
  // [full_inter] with L_k <= L. Compute() is then unavailable (CHECKed);
  // use GateUp and Down.
  static absl::StatusOr<std::unique_ptr<ExpertExecutor>> CreateSliced(
      const ExpertIndex& index, uint64_t full_inter,
      const model::GluActivation& act, kernels::ThreadPool* pool);

  size_t latent() const { return latent_; }        // L: input width
  size_t intermediate() const { return inter_; }   // I_k: W1/W3 rows held
  size_t down_rows() const { return down_rows_; }  // L_k: W2 rows held
  size_t down_cols() const { return down_cols_; }  // I: W2 columns
  bool sliced() const { return down_rows_ != latent_ || down_cols_ != inter_; }

  // x: [n][L] input rows; y: [n][L] output (must not alias x). `run` holds
  // the expert's `loc.length` run bytes. Whole experts only.
  void Compute(const ExpertLocation& loc, const uint8_t* run, const float* x,
               size_t n, float* y);
  // act[n][I_k] = act(W1 x, W3 x) for the rows held; x: [n][L].
  void GateUp(const ExpertLocation& loc, const uint8_t* run, const float* x,
              size_t n, float* act);
  // y[n][L_k] = W2 act for the rows held; act: [n][I] (the whole vector).
  void Down(const ExpertLocation& loc, const uint8_t* run, const float* act,
            size_t n, float* y);

 private:
  ExpertExecutor(ExpertFormat format, const std::array<MatrixShape, 3>& shapes,
                 const model::GluActivation& act, kernels::ThreadPool* pool)
      : format_(format),
        latent_(shapes[0].cols),
        inter_(shapes[0].rows),
        down_rows_(shapes[1].rows),
        down_cols_(shapes[1].cols),
        act_kind_(act),
        pool_(pool),
        shapes_(shapes) {}

  // y[n][rows] = W x for matrix `which` (0, 1, 2 = w1, w2, w3).
  void Apply(int which, const ExpertLocation& loc, const uint8_t* run,
             const float* x, size_t n, float* y);

  const ExpertFormat format_;
  const size_t latent_, inter_, down_rows_, down_cols_;
  const model::GluActivation act_kind_;
  kernels::ThreadPool* const pool_;
  const std::array<MatrixShape, 3> shapes_;  // w1, w2, w3
  // Scratch, [n][I_k] (h1_, h3_) and [n][I] (act_); grown on demand and
  // reused.
  std::vector<float> h1_, h3_, act_;
  // Aligned copy of a misaligned dense matrix (rarely used).
  std::vector<float> dense_copy_;
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_EXECUTOR_H_
