#include "coordinator/families/gpt_oss/gpt_oss_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/model/decoder_step.h"
#include "coordinator/model/yarn_rope.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

// y[t][i] += b[i] for n rows of `width` (upstream's nn.Linear bias, added
// after the product in float).
void AddBias(const float* b, size_t n, size_t width, float* y) {
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < width; ++i) y[t * width + i] += b[i];
  }
}

}  // namespace

std::unique_ptr<GptOssModel> GptOssModel::Create(
    const model::GptOssConfig& c, std::unique_ptr<RegionTrunk> trunk,
    std::unique_ptr<kernels::ThreadPool> pool,
    std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive) {
  auto m = std::unique_ptr<GptOssModel>(new GptOssModel(c));
  m->keep_alive_ = std::move(keep_alive);
  m->pool_ = std::move(pool);
  m->trunk_ = std::move(trunk);
  m->experts_ = std::move(experts);
  YarnParams yarn;
  yarn.dim = c.head_dim;
  yarn.theta = c.rope_theta;
  yarn.factor = c.yarn_factor;
  yarn.original_max_position = c.yarn_original_max_position;
  yarn.beta_fast = c.yarn_beta_fast;
  yarn.beta_slow = c.yarn_beta_slow;
  yarn.truncate = c.yarn_truncate;
  GqaSpec spec{c.num_attention_heads, c.num_key_value_heads, c.head_dim,
               c.rope_theta, /*sliding_window=*/0};
  if (c.yarn_factor > 1) {
    spec.inv_freq = YarnInvFreq(yarn);
    spec.rope_factor = YarnAttentionFactor(yarn);
  }
  m->full_ = std::make_unique<GqaAttention>(spec);
  spec.sliding_window = c.sliding_window;
  m->sliding_ = std::make_unique<GqaAttention>(spec);
  // The top k router logits (bias added), softmaxed among themselves.
  m->router_.scoring = RouterSpec::Scoring::kTopKSoftmax;
  m->router_.num_experts = c.num_local_experts;
  m->router_.top_k = c.num_experts_per_tok;
  return m;
}

std::unique_ptr<ModelSequence> GptOssModel::StartSequence() const {
  auto s = std::make_unique<GptOssSequence>();
  s->Start(config_.num_hidden_layers);
  SetWindows(s.get());
  return s;
}

absl::StatusOr<std::unique_ptr<ModelSequence>> GptOssModel::LoadSequence(
    absl::string_view bytes) const {
  const model::GptOssConfig& c = config_;
  auto s = std::make_unique<GptOssSequence>();
  s->Start(c.num_hidden_layers);
  SetWindows(s.get());
  // A sliding layer holds the window's last W - 1 positions between steps.
  FLOTILLA_RETURN_IF_ERROR(
      s->Load(bytes, c.num_hidden_layers,
              static_cast<uint64_t>(c.max_position_embeddings),
              static_cast<uint64_t>(c.num_key_value_heads) * c.head_dim,
              [&c](size_t layer, uint64_t positions) {
                return c.sliding_layers[layer]
                           ? std::min<uint64_t>(positions, c.sliding_window - 1)
                           : positions;
              }));
  return std::unique_ptr<ModelSequence>(std::move(s));
}

void GptOssModel::SetWindows(GptOssSequence* s) const {
  for (int l = 0; l < config_.num_hidden_layers; ++l) {
    s->window[l] = config_.sliding_layers[l] ? config_.sliding_window : 0;
  }
}

void GptOssModel::Attention(const GptOssLayer& w, int layer,
                            const StepRows& step, const float* normed,
                            const std::vector<GptOssSequence*>& seqs,
                            float* out) {
  const model::GptOssConfig& c = config_;
  const size_t n = step.size(), d = c.head_dim;
  const size_t qw = c.num_attention_heads * d, kw = c.num_key_value_heads * d;
  // Every sequence's rows through each projection at once; the attention
  // itself per sequence, against its own cache and window.
  std::vector<float> q(n * qw), k(n * kw), v(n * kw);
  kernels::MatMul(w.q, normed, n, q.data(), pool_.get());
  kernels::MatMul(w.k, normed, n, k.data(), pool_.get());
  kernels::MatMul(w.v, normed, n, v.data(), pool_.get());
  AddBias(w.q_bias, n, qw, q.data());
  AddBias(w.k_bias, n, kw, k.data());
  AddBias(w.v_bias, n, kw, v.data());
  std::vector<float> attn(n * qw);
  const GqaAttention& a = c.sliding_layers[layer] ? *sliding_ : *full_;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const size_t r0 = step.offset[i], rows = step.offset[i + 1] - r0;
    GptOssSequence* seq = seqs[i];
    a.Attend(q.data() + r0 * qw, k.data() + r0 * kw, v.data() + r0 * kw, rows,
             seq->positions, &seq->keys[layer], &seq->values[layer],
             attn.data() + r0 * qw, QkNorm{}, w.sinks, seq->first[layer],
             pool_.get());
    a.TrimToWindow(seq->positions + rows, &seq->keys[layer],
                   &seq->values[layer], &seq->first[layer]);
  }
  kernels::MatMul(w.o, attn.data(), n, out, pool_.get());
  AddBias(w.o_bias, n, c.hidden_size, out);
}

absl::Status GptOssModel::Experts(int layer, const GptOssLayer& w,
                                  const float* normed, size_t n, float* out) {
  const size_t e = config_.num_local_experts;
  std::vector<float> logits(n * e);
  kernels::MatMul(w.router, normed, n, logits.data(), pool_.get());
  AddBias(w.router_bias, n, e, logits.data());
  return RouteAndRunExperts(router_, layer, logits.data(), nullptr, normed, n,
                            experts_.get(), out);
}

absl::Status GptOssModel::Step(
    const std::vector<GptOssSequence*>& seqs,
    const std::vector<const std::vector<int32_t>*>& ids,
    const std::vector<size_t>& out_rows, std::vector<float>* logits) {
  const model::GptOssConfig& c = config_;
  return RunDecoderStep<GptOssLayer>(
      *trunk_, c.num_hidden_layers, c.hidden_size, c.rms_norm_eps, seqs, ids,
      out_rows, logits, pool_.get(),
      [&](const GptOssLayer& w, int layer, const StepRows& step, const float* x,
          float* out) { Attention(w, layer, step, x, seqs, out); },
      [&](const GptOssLayer& w, int layer, const float* x, size_t rows,
          float* out) {
        return base::WithContext(Experts(layer, w, x, rows, out),
                                 absl::StrCat("the experts of layer ", layer));
      });
}

}  // namespace flotilla::coordinator
