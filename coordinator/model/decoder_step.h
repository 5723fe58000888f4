// The pieces of one forward step that every pre-norm decoder family over a
// RegionTrunk takes the same way (DeepSeek-V3, Qwen3-MoE): the step's rows
// (each sequence's new tokens, one sequence after another), the embedding
// rows, the residual stack of layers, the check that stops a broken step at
// the first non-finite value naming its position, and the final norm and
// lm_head over the rows whose logits are asked for.
#ifndef FLOTILLA_COORDINATOR_MODEL_DECODER_STEP_H_
#define FLOTILLA_COORDINATOR_MODEL_DECODER_STEP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/region_trunk.h"
#include "coordinator/model/router.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"
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

// DataLoss naming `what`, the position and the element of the first
// non-finite value of x ([rows][width]); row r is step row (*rows)[r], or r
// when null.
absl::Status CheckFinite(const std::vector<float>& x, size_t width,
                         const char* what, const StepRows& step,
                         const std::vector<size_t>* rows);

// The pre-norm residual stack: for each layer, its bound region (a `Layer`
// with input_norm and post_norm) acquired and released however the layer
// ends (so a streamed ring stays in step),
//   h += attention(w, layer, step, RMSNorm_in(h) over every row): one call
//        for the whole step, so that a family projects every sequence's
//        rows in one matmul (a weight read once per step, not once per
//        sequence) and attends per sequence, whose state it keeps,
//   h += ffn(w, layer, RMSNorm_post(h) over every row),
// then the first non-finite value refused. attention(const Layer&, int,
// const StepRows&, const float* x, float* out) with x and out
// [step.size()][hidden]; ffn(const Layer&, int, const float* x, size_t
// rows, float* out) -> absl::Status.
template <class Layer, class Attention, class Ffn>
absl::Status RunPreNormLayers(RegionTrunk& trunk, int num_layers, size_t hidden,
                              float eps, const StepRows& step,
                              std::vector<float>* h, Attention attention,
                              Ffn ffn) {
  const size_t n = step.size(), e = hidden;
  std::vector<float> normed(n * e), delta(n * e);
  FLOTILLA_RETURN_IF_ERROR(trunk.BeginStep());
  for (int layer = 0; layer < num_layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(const BoundRegion* bound, trunk.Acquire(layer));
    const absl::Cleanup release = [&] { trunk.Release(layer); };
    const Layer& w = *static_cast<const Layer*>(bound);
    for (size_t t = 0; t < n; ++t) {
      kernels::RmsNorm(h->data() + t * e, w.input_norm, e, eps,
                       normed.data() + t * e);
    }
    attention(w, layer, step, normed.data(), delta.data());
    for (size_t k = 0; k < n * e; ++k) (*h)[k] += delta[k];
    for (size_t t = 0; t < n; ++t) {
      kernels::RmsNorm(h->data() + t * e, w.post_norm, e, eps,
                       normed.data() + t * e);
    }
    FLOTILLA_RETURN_IF_ERROR(ffn(w, layer, normed.data(), n, delta.data()));
    for (size_t k = 0; k < n * e; ++k) (*h)[k] += delta[k];
    FLOTILLA_RETURN_IF_ERROR(CheckFinite(
        *h, e, absl::StrCat("activation after layer ", layer).c_str(), step,
        nullptr));
  }
  return absl::OkStatus();
}

// logits[r][vocab] = lm_head(RMSNorm_final(h[out_rows[r]])), then checked.
absl::Status FinalLogits(const RegionTrunk& trunk, const std::vector<float>& h,
                         size_t hidden, float eps, const StepRows& step,
                         const std::vector<size_t>& out_rows,
                         std::vector<float>* logits, kernels::ThreadPool* pool);

// One whole step over sequences that count their `positions`: the rows
// laid out, embedded, run through RunPreNormLayers, the positions
// advanced, and `logits` [out_rows][vocab] from the final norm and lm_head.
template <class Layer, class Sequence, class Attention, class Ffn>
absl::Status RunDecoderStep(RegionTrunk& trunk, int num_layers, size_t hidden,
                            float eps, const std::vector<Sequence*>& seqs,
                            const std::vector<const std::vector<int32_t>*>& ids,
                            const std::vector<size_t>& out_rows,
                            std::vector<float>* logits,
                            kernels::ThreadPool* pool, Attention attention,
                            Ffn ffn) {
  std::vector<size_t> first;
  for (const Sequence* s : seqs) first.push_back(s->positions);
  const StepRows step = LayOutStep(first, ids);
  std::vector<float> h(step.size() * hidden);
  EmbedRows(trunk.embed(), ids, h.data());
  FLOTILLA_RETURN_IF_ERROR(RunPreNormLayers<Layer>(
      trunk, num_layers, hidden, eps, step, &h, attention, ffn));
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->positions += ids[i]->size();
  return FinalLogits(trunk, h, hidden, eps, step, out_rows, logits, pool);
}

// A MoE layer's routed experts for `n` rows: their tasks from the router
// logits [n][num_experts] (`bias` for the choice, or null), computed by
// `experts` on `normed` into out [n][hidden], and counted.
inline absl::Status RouteAndRunExperts(const RouterSpec& router, int layer,
                                       const float* logits, const float* bias,
                                       const float* normed, size_t n,
                                       ExpertBackend* experts, float* out) {
  std::vector<ExpertTask> tasks;
  Route(router, logits, bias, n, &tasks);
  FLOTILLA_RETURN_IF_ERROR(
      experts->ComputeLayer(layer, normed, static_cast<int>(n), tasks, out));
  experts->RecordRouted(layer, tasks.size());
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_DECODER_STEP_H_
