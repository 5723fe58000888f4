// ExpertExecutor: pure compute of one routed expert on the bytes of its run,
// y = W2 SiTU(W1 x, W3 x), with the kernels' fixed reduction orders (so the
// result does not depend on where the bytes came from, the thread count or
// which other rows are in the batch).
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

namespace flotilla::experts {

class ExpertExecutor {
 public:
  // Checks that the index's shapes form an expert: w1 and w3 [I][L], w2
  // [L][I]. beta1/beta2 are the SiTU betas (config situ_beta,
  // situ_linear_beta). `pool` may be null (single-threaded); it must outlive
  // the executor.
  static absl::StatusOr<std::unique_ptr<ExpertExecutor>> Create(
      const ExpertIndex& index, float beta1, float beta2,
      kernels::ThreadPool* pool);

  size_t latent() const { return latent_; }       // L
  size_t intermediate() const { return inter_; }  // I

  // x: [n][L] input rows; y: [n][L] output (must not alias x). `run` holds
  // the expert's `loc.length` run bytes.
  void Compute(const ExpertLocation& loc, const uint8_t* run, const float* x,
               size_t n, float* y);

 private:
  ExpertExecutor(ExpertFormat format, size_t latent, size_t inter, float beta1,
                 float beta2, kernels::ThreadPool* pool)
      : format_(format),
        latent_(latent),
        inter_(inter),
        beta1_(beta1),
        beta2_(beta2),
        pool_(pool) {}

  // y[n][rows] = W x for matrix `which` (0, 1, 2 = w1, w2, w3).
  void Apply(int which, const ExpertLocation& loc, const uint8_t* run,
             const float* x, size_t n, float* y);

  const ExpertFormat format_;
  const size_t latent_, inter_;
  const float beta1_, beta2_;
  kernels::ThreadPool* const pool_;
  std::array<MatrixShape, 3> shapes_{};
  // Scratch, [n][I] each; grown on demand and reused.
  std::vector<float> h1_, h3_, act_;
  // Aligned copy of a misaligned dense matrix (rarely used).
  std::vector<float> dense_copy_;
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_EXECUTOR_H_
