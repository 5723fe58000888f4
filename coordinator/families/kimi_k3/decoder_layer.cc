#include "coordinator/families/kimi_k3/decoder_layer.h"

#include <cmath>

#include "coordinator/families/kimi_k3/moe.h"
#include "shared/base/check.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {

void AttnResAggregate(const std::vector<const float*>& sources,
                      const float* fold, size_t width, float eps, float* out) {
  const size_t n = sources.size();
  std::vector<float> scores(n);
  for (size_t i = 0; i < n; ++i) {
    const double ss = kernels::DotF32(sources[i], sources[i], width);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(width) + eps);
    scores[i] =
        static_cast<float>(kernels::DotF32(fold, sources[i], width) * inv);
  }
  kernels::Softmax(scores.data(), n);
  for (size_t j = 0; j < width; ++j) {
    double acc = 0;
    for (size_t i = 0; i < n; ++i) acc += double{scores[i]} * sources[i][j];
    out[j] = static_cast<float>(acc);
  }
}

void AggregateAll(const ResidualStreams& s, const float* fold, size_t width,
                  float eps, float* out) {
  std::vector<const float*> src(s.blocks.size() + 1);
  for (int t = 0; t < s.steps; ++t) {
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      src[b] = s.blocks[b].data() + t * width;
    }
    src.back() = s.partial.data() + t * width;
    AttnResAggregate(src, fold, width, eps, out + t * width);
  }
}

absl::Status DecoderLayerForward(const LayerWeights& w,
                                 const model::K3Config& c, int layer,
                                 ResidualStreams* s, KdaState* kda,
                                 MlaCache* mla, ExpertBackend* experts,
                                 kernels::ThreadPool* pool) {
  const StepSequences one = {{0, static_cast<size_t>(s->steps)}, {kda}, {mla}};
  return DecoderLayerForward(w, c, layer, s, one, experts, pool);
}

absl::Status DecoderLayerForward(const LayerWeights& w,
                                 const model::K3Config& c, int layer,
                                 ResidualStreams* s,
                                 const StepSequences& sequences,
                                 ExpertBackend* experts,
                                 kernels::ThreadPool* pool) {
  const size_t e = c.hidden_size, n = s->steps;
  const float eps = c.rms_norm_eps;
  // a = AR(B + {R_in}) when there are snapshots, else R_in.
  std::vector<float> a(n * e), normed(n * e), o(n * e);
  if (s->blocks.empty()) {
    a = s->partial;
  } else {
    AggregateAll(*s, w.attn_res_fold.data(), e, eps, a.data());
  }
  // A block boundary snapshots R_in and restarts the running sum.
  const bool boundary = layer % c.attn_res_block_size == 0;
  if (boundary) s->blocks.push_back(s->partial);
  for (size_t t = 0; t < n; ++t) {
    kernels::RmsNorm(a.data() + t * e, w.input_norm.data(), e, eps,
                     normed.data() + t * e);
  }
  // Attention: projections batched over every sequence's rows, the rest
  // per sequence (its cache or recurrent state).
  const std::vector<size_t>& offsets = sequences.offsets;
  FLOTILLA_CHECK(!offsets.empty() && offsets.front() == 0 &&
                 offsets.back() == n);
  if (w.is_mla) {
    FLOTILLA_CHECK(sequences.mla.size() + 1 == offsets.size());
    MlaForwardRows(w.mla, c, normed.data(), offsets, sequences.mla, o.data(),
                   pool);
  } else {
    FLOTILLA_CHECK(sequences.kda.size() + 1 == offsets.size());
    KdaForwardRows(w.kda, c, normed.data(), offsets, sequences.kda, o.data(),
                   pool);
  }
  if (boundary) {
    s->partial = o;
  } else {
    for (size_t i = 0; i < n * e; ++i) s->partial[i] += o[i];
  }
  // m = AR(B + {R}); R += FFN(norm(m)).
  AggregateAll(*s, w.mlp_res_fold.data(), e, eps, a.data());
  for (size_t t = 0; t < n; ++t) {
    kernels::RmsNorm(a.data() + t * e, w.post_norm.data(), e, eps,
                     normed.data() + t * e);
  }
  if (w.is_dense) {
    DenseFfnForward(w.dense, c, normed.data(), n, o.data(), pool);
  } else {
    FLOTILLA_RETURN_IF_ERROR(
        MoeForward(w.moe, c, layer, normed.data(), n, experts, o.data(), pool));
  }
  for (size_t i = 0; i < n * e; ++i) s->partial[i] += o[i];
  return absl::OkStatus();
}

std::vector<int> PredictLayerExperts(const LayerWeights& w,
                                     const model::K3Config& c,
                                     const ResidualStreams& s, int extra,
                                     kernels::ThreadPool* pool) {
  const size_t e = c.hidden_size, n = s.steps;
  std::vector<float> a(n * e), normed(n * e);
  if (s.blocks.empty()) {
    a = s.partial;
  } else {
    AggregateAll(s, w.mlp_res_fold.data(), e, c.rms_norm_eps, a.data());
  }
  for (size_t t = 0; t < n; ++t) {
    kernels::RmsNorm(a.data() + t * e, w.post_norm.data(), e, c.rms_norm_eps,
                     normed.data() + t * e);
  }
  return RoutedExpertUnion(w.moe, c, normed.data(), s.steps, extra, pool);
}

}  // namespace flotilla::coordinator
