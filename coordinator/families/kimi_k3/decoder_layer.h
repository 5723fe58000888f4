// One K3 decoder layer with Block Attention Residuals, over all tokens of a
// forward step (docs/k3-architecture.md section 3 "Decoder layer").
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_DECODER_LAYER_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_DECODER_LAYER_H_

#include <vector>

#include "absl/status/status.h"
#include "coordinator/families/kimi_k3/kda.h"
#include "coordinator/families/kimi_k3/mla.h"
#include "coordinator/families/kimi_k3/weights.h"
#include "coordinator/model/expert_backend.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// AttnRes aggregator for one token: softmax over sources of
// fold . (v_i / rms(v_i)), then sum of p_i * v_i (raw sources).
void AttnResAggregate(const std::vector<const float*>& sources,
                      const float* fold, size_t width, float eps, float* out);

// Per-token residual state of one forward step. It lives only for the step:
// nothing here is carried between tokens.
struct ResidualStreams {
  int steps = 0;
  // Completed block snapshots, oldest first; each [steps][E].
  std::vector<std::vector<float>> blocks;
  // The running within-block sum (the layer output h): [steps][E].
  std::vector<float> partial;
};

// The sequences sharing a step: sequence i owns rows [offsets[i],
// offsets[i + 1]) (as StepRows::offset) and, for the layer being run, the
// states kda[i] and mla[i] (a layer uses one of the two, by its type).
struct StepSequences {
  std::vector<size_t> offsets;
  std::vector<KdaState*> kda;
  std::vector<MlaCache*> mla;
};

// Runs layer `layer` for every row in `streams`, which hold the new tokens
// of one or more sequences (`sequences` covers the rows in order).
// Attention's projections run over all rows at once and the rest of it per
// sequence on its own state; everything else (AttnRes, norms, the FFN and
// the routed experts) runs over all rows at once, so the layer's
// experts are asked for once per step for the whole batch. Every kernel is
// row-independent, so each row's result is bitwise that of a solo run.
absl::Status DecoderLayerForward(const LayerWeights& w,
                                 const model::K3Config& config, int layer,
                                 ResidualStreams* streams,
                                 const StepSequences& sequences,
                                 ExpertBackend* experts,
                                 kernels::ThreadPool* pool);

// One sequence owning every row of `streams`.
absl::Status DecoderLayerForward(const LayerWeights& w,
                                 const model::K3Config& config, int layer,
                                 ResidualStreams* streams, KdaState* kda,
                                 MlaCache* mla, ExpertBackend* experts,
                                 kernels::ThreadPool* pool);

// Guess of the routed experts layer `w`'s MoE will select, made before the
// layer runs: its router on post_norm(AttnRes(blocks + partial)) with its
// MLP fold, i.e. the real MoE input minus this layer's attention output.
// Each token contributes its top (k + extra). Cheap next to the layer (one
// router matmul); the forward pass hands it to ExpertBackend::PrefetchLayer
// so the disk reads while attention computes.
std::vector<int> PredictLayerExperts(const LayerWeights& w,
                                     const model::K3Config& config,
                                     const ResidualStreams& streams, int extra,
                                     kernels::ThreadPool* pool);

// hf = AttnRes(blocks + partial) with `fold`, per token: [steps][E].
void AggregateAll(const ResidualStreams& streams, const float* fold,
                  size_t width, float eps, float* out);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_DECODER_LAYER_H_
