#include "coordinator/families/qwen3_moe/qwen3_moe_model.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "coordinator/model/batched_step.h"
#include "coordinator/model/decoder_step.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {

std::unique_ptr<Qwen3MoeModel> Qwen3MoeModel::Create(
    const model::Qwen3MoeConfig& c, std::unique_ptr<RegionTrunk> trunk,
    std::unique_ptr<kernels::ThreadPool> pool,
    std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive) {
  auto m = std::unique_ptr<Qwen3MoeModel>(new Qwen3MoeModel(c));
  m->keep_alive_ = std::move(keep_alive);
  m->pool_ = std::move(pool);
  m->trunk_ = std::move(trunk);
  m->experts_ = std::move(experts);
  m->attention_ = std::make_unique<GqaAttention>(GqaSpec{
      c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rope_theta,
      /*sliding_window=*/0});
  // Softmax over every expert, the top k (renormalised when norm_topk_prob).
  m->router_.scoring = RouterSpec::Scoring::kSoftmax;
  m->router_.num_experts = c.num_experts;
  m->router_.top_k = c.num_experts_per_tok;
  m->router_.renormalize = c.norm_topk_prob;
  return m;
}

std::unique_ptr<ModelSequence> Qwen3MoeModel::StartSequence() const {
  auto s = std::make_unique<Qwen3MoeSequence>();
  s->Start(config_.num_hidden_layers);
  return s;
}

absl::StatusOr<std::unique_ptr<ModelSequence>> Qwen3MoeModel::LoadSequence(
    absl::string_view bytes) const {
  auto s = std::make_unique<Qwen3MoeSequence>();
  FLOTILLA_RETURN_IF_ERROR(s->Load(
      bytes, config_.num_hidden_layers,
      static_cast<uint64_t>(config_.max_position_embeddings),
      static_cast<uint64_t>(config_.num_key_value_heads) * config_.head_dim,
      [](size_t, uint64_t positions) { return positions; }));
  return std::unique_ptr<ModelSequence>(std::move(s));
}

void Qwen3MoeModel::Attention(const Qwen3MoeLayer& w, int layer,
                              const StepRows& step, const float* normed,
                              const std::vector<Qwen3MoeSequence*>& seqs,
                              float* out) {
  const model::Qwen3MoeConfig& c = config_;
  const size_t n = step.size(), d = c.head_dim;
  const size_t qw = c.num_attention_heads * d, kw = c.num_key_value_heads * d;
  // Every sequence's rows through each projection at once; the attention
  // itself per sequence, against its own cache.
  std::vector<float> q(n * qw), k(n * kw), v(n * kw);
  kernels::MatMul(w.q, normed, n, q.data(), pool_.get());
  kernels::MatMul(w.k, normed, n, k.data(), pool_.get());
  kernels::MatMul(w.v, normed, n, v.data(), pool_.get());
  std::vector<float> attn(n * qw);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const size_t r0 = step.offset[i], rows = step.offset[i + 1] - r0;
    Qwen3MoeSequence* seq = seqs[i];
    attention_->Attend(
        q.data() + r0 * qw, k.data() + r0 * kw, v.data() + r0 * kw, rows,
        seq->positions, &seq->keys[layer], &seq->values[layer],
        attn.data() + r0 * qw, QkNorm{w.q_norm, w.k_norm, c.rms_norm_eps},
        nullptr, 0, pool_.get());
  }
  kernels::MatMul(w.o, attn.data(), n, out, pool_.get());
}

absl::Status Qwen3MoeModel::Ffn(int layer, const Qwen3MoeLayer& w,
                                const float* normed, size_t n, float* out) {
  if (!w.moe) {
    const size_t inter = w.gate.rows;
    std::vector<float> g(n * inter), u(n * inter);
    kernels::MatMul(w.gate, normed, n, g.data(), pool_.get());
    kernels::MatMul(w.up, normed, n, u.data(), pool_.get());
    const float inf = std::numeric_limits<float>::infinity();
    kernels::SituGlu(g.data(), u.data(), n * inter, inf, inf, g.data());
    kernels::MatMul(w.down, g.data(), n, out, pool_.get());
    return absl::OkStatus();
  }
  std::vector<float> logits(n * config_.num_experts);
  kernels::MatMul(w.router, normed, n, logits.data(), pool_.get());
  return RouteAndRunExperts(router_, layer, logits.data(), nullptr, normed, n,
                            experts_.get(), out);
}

absl::Status Qwen3MoeModel::Step(
    const std::vector<Qwen3MoeSequence*>& seqs,
    const std::vector<const std::vector<int32_t>*>& ids,
    const std::vector<size_t>& out_rows, std::vector<float>* logits) {
  const model::Qwen3MoeConfig& c = config_;
  return RunDecoderStep<Qwen3MoeLayer>(
      *trunk_, c.num_hidden_layers, c.hidden_size, c.rms_norm_eps, seqs, ids,
      out_rows, logits, pool_.get(),
      [&](const Qwen3MoeLayer& w, int layer, const StepRows& step,
          const float* x,
          float* out) { Attention(w, layer, step, x, seqs, out); },
      [&](const Qwen3MoeLayer& w, int layer, const float* x, size_t rows,
          float* out) {
        return base::WithContext(
            Ffn(layer, w, x, rows, out),
            absl::StrCat("the feed-forward of layer ", layer));
      });
}

}  // namespace flotilla::coordinator
