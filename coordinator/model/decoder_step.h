// The pieces of one forward step that every pre-norm decoder family over a
// RegionTrunk takes the same way (DeepSeek-V3, Qwen3-MoE): the step's rows
// (each sequence's new tokens, one sequence after another), the embedding
// rows, the check that stops a broken step at the first non-finite value
// naming its position, and the final norm and lm_head over the rows whose
// logits are asked for.
#ifndef FLOTILLA_COORDINATOR_MODEL_DECODER_STEP_H_
#define FLOTILLA_COORDINATOR_MODEL_DECODER_STEP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/model/region_trunk.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

struct StepRows {
  std::vector<size_t> offset;    // sequence i's rows: [offset[i], offset[i+1])
  std::vector<size_t> position;  // each row's position in its sequence
  size_t size() const { return offset.back(); }
};

// `first[i]`: the positions sequence i already holds.
StepRows LayOutStep(const std::vector<size_t>& first,
                    const std::vector<const std::vector<int32_t>*>& ids);

// h[row][hidden] = the embedding row of each id (BF16 widened).
void EmbedRows(const kernels::DenseMatrix& embed,
               const std::vector<const std::vector<int32_t>*>& ids, float* h);

// DataLoss naming `what` and the position of the first non-finite value of
// x ([rows][width]); row r is step row (*rows)[r], or r when null.
absl::Status CheckFinite(const std::vector<float>& x, size_t width,
                         const char* what, const StepRows& step,
                         const std::vector<size_t>* rows);

// logits[r][vocab] = lm_head(RMSNorm_final(h[out_rows[r]])), then checked.
absl::Status FinalLogits(const RegionTrunk& trunk, const std::vector<float>& h,
                         size_t hidden, float eps, const StepRows& step,
                         const std::vector<size_t>& out_rows,
                         std::vector<float>* logits, kernels::ThreadPool* pool);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_DECODER_STEP_H_
