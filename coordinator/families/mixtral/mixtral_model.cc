#include "coordinator/families/mixtral/mixtral_model.h"

#include "shared/base/status_macros.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "coordinator/model/batched_step.h"
#include "coordinator/model/gqa_attention.h"
#include "coordinator/model/router.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {


std::unique_ptr<MixtralModel> MixtralModel::Create(
    const model::MixtralConfig& c, std::unique_ptr<MixtralTrunk> trunk,
    std::unique_ptr<kernels::ThreadPool> pool,
    std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive) {
  auto m = std::unique_ptr<MixtralModel>(new MixtralModel());
  m->config_ = c;
  m->keep_alive_ = std::move(keep_alive);
  m->pool_ = std::move(pool);
  m->trunk_ = std::move(trunk);
  m->experts_ = std::move(experts);
  m->attention_ = std::make_unique<GqaAttention>(
      GqaSpec{c.num_attention_heads, c.num_key_value_heads, c.head_dim,
              c.rope_theta, c.sliding_window});
  return m;
}

absl::StatusOr<std::unique_ptr<ModelSequence>> MixtralModel::LoadSequence(
    absl::string_view bytes) const {
  auto s = std::make_unique<MixtralSequence>();
  FLOTILLA_RETURN_IF_ERROR(s->Load(
      bytes, config_.num_hidden_layers, uint64_t{1} << 31,
      static_cast<uint64_t>(config_.num_key_value_heads) * config_.head_dim,
      [](size_t, uint64_t positions) { return positions; }));
  return std::unique_ptr<ModelSequence>(std::move(s));
}

std::unique_ptr<ModelSequence> MixtralModel::StartSequence() const {
  auto s = std::make_unique<MixtralSequence>();
  s->Start(config_.num_hidden_layers);
  return s;
}

absl::Status MixtralModel::Attention(const MixtralLayerView& w, int layer,
                                     const float* normed, size_t n,
                                     MixtralSequence* seq, float* out) {
  const model::MixtralConfig& c = config_;
  const size_t d = c.head_dim;
  const size_t heads = c.num_attention_heads, kv_heads = c.num_key_value_heads;
  std::vector<float> q(n * heads * d), k(n * kv_heads * d), v(n * kv_heads * d);
  kernels::MatMul(w.q, normed, n, q.data(), pool_.get());
  kernels::MatMul(w.k, normed, n, k.data(), pool_.get());
  kernels::MatMul(w.v, normed, n, v.data(), pool_.get());
  std::vector<float> attn(n * heads * d);
  attention_->Attend(q.data(), k.data(), v.data(), n, seq->positions,
                     &seq->keys[layer], &seq->values[layer], attn.data(),
                     QkNorm{}, nullptr, 0, pool_.get());
  kernels::MatMul(w.o, attn.data(), n, out, pool_.get());
  return absl::OkStatus();
}

absl::Status MixtralModel::Moe(int layer, const MixtralLayerView& w,
                               const float* normed, size_t n, float* out) {
  const model::MixtralConfig& c = config_;
  const size_t experts = c.num_local_experts, k = c.num_experts_per_tok;
  std::vector<float> logits(n * experts);
  kernels::MatMul(w.router, normed, n, logits.data(), pool_.get());
  // Softmax over every expert, the top k renormalised (router.h).
  RouterSpec spec;
  spec.scoring = RouterSpec::Scoring::kSoftmax;
  spec.num_experts = static_cast<int>(experts);
  spec.top_k = static_cast<int>(k);
  std::vector<ExpertTask> tasks;
  Route(spec, logits.data(), nullptr, n, &tasks);
  FLOTILLA_RETURN_IF_ERROR(
      experts_->ComputeLayer(layer, normed, static_cast<int>(n), tasks, out));
  experts_->RecordRouted(layer, tasks.size());
  return absl::OkStatus();
}

absl::StatusOr<MixtralSequence*> MixtralModel::CheckInput(
    ModelSequence* sequence, const std::vector<int32_t>& ids) const {
  auto* seq = dynamic_cast<MixtralSequence*>(sequence);
  if (seq == nullptr) {
    return absl::InvalidArgumentError(
        "the sequence was not started by this Mixtral model");
  }
  FLOTILLA_RETURN_IF_ERROR(CheckTokenIds(ids, config_.vocab_size));
  if (seq->positions + ids.size() >
      static_cast<size_t>(config_.max_position_embeddings)) {
    return absl::OutOfRangeError(absl::StrCat(
        "the sequence would reach ", seq->positions + ids.size(),
        " tokens; the model's context (max_position_embeddings) is ",
        config_.max_position_embeddings));
  }
  return seq;
}

absl::Status MixtralModel::Forward(ModelSequence* sequence,
                                   const std::vector<int32_t>& ids,
                                   bool all_positions,
                                   std::vector<float>* logits) {
  FLOTILLA_ASSIGN_OR_RETURN(MixtralSequence * seq, CheckInput(sequence, ids));
  std::vector<size_t> rows;
  for (size_t r = all_positions ? 0 : ids.size() - 1; r < ids.size(); ++r) {
    rows.push_back(r);
  }
  return Step({seq}, {&ids}, rows, logits);
}

absl::Status MixtralModel::ForwardBatch(
    const std::vector<ModelSequence*>& sequences,
    const std::vector<std::vector<int32_t>>& ids,
    std::vector<std::vector<float>>* last_logits) {
  return RunBatchedStep<MixtralSequence>(
      sequences, ids, config_.vocab_size,
      [this](ModelSequence* s, const std::vector<int32_t>& i) {
        return CheckInput(s, i);
      },
      [this](const std::vector<MixtralSequence*>& seqs,
             const std::vector<const std::vector<int32_t>*>& lists,
             const std::vector<size_t>& rows, std::vector<float>* logits) {
        return Step(seqs, lists, rows, logits);
      },
      last_logits);
}

absl::Status MixtralModel::Step(
    const std::vector<MixtralSequence*>& seqs,
    const std::vector<const std::vector<int32_t>*>& ids,
    const std::vector<size_t>& out_rows, std::vector<float>* logits) {
  const model::MixtralConfig& c = config_;
  const size_t e = c.hidden_size, v = c.vocab_size;
  // Rows of the step: each sequence's new tokens, one after another.
  std::vector<size_t> offset(seqs.size() + 1, 0), position;
  for (size_t i = 0; i < seqs.size(); ++i) {
    offset[i + 1] = offset[i] + ids[i]->size();
    for (size_t t = 0; t < ids[i]->size(); ++t) {
      position.push_back(seqs[i]->positions + t);
    }
  }
  const size_t n = offset.back();
  std::vector<float> h(n * e), normed(n * e), delta(n * e);
  const kernels::DenseMatrix& embed = trunk_->embed();
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (size_t t = 0; t < ids[i]->size(); ++t) {
      const size_t row = static_cast<size_t>((*ids[i])[t]) * e;
      float* dst = h.data() + (offset[i] + t) * e;
      for (size_t k = 0; k < e; ++k) {
        dst[k] = embed.type == kernels::DenseType::kF32
                     ? static_cast<const float*>(embed.data)[row + k]
                     : kernels::Bf16ToF32(
                           static_cast<const uint16_t*>(embed.data)[row + k]);
      }
    }
  }
  // An error naming where the first non-finite value of rows [..][width]
  // is; row r of `x` is step row (*step_row)[r], or r when null.
  auto check = [&](const std::vector<float>& x, size_t width, const char* what,
                   const std::vector<size_t>* step_row) -> absl::Status {
    for (size_t k = 0; k < x.size(); ++k) {
      if (!std::isfinite(x[k])) {
        const size_t r = k / width;
        return absl::DataLossError(
            absl::StrCat("non-finite ", what, " (", x[k], ") at position ",
                         position[step_row != nullptr ? (*step_row)[r] : r],
                         ": the weights or the computation are broken"));
      }
    }
    return absl::OkStatus();
  };
  FLOTILLA_RETURN_IF_ERROR(trunk_->BeginStep());
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    // One read of the layer (and one expert call below) for every sequence.
    FLOTILLA_ASSIGN_OR_RETURN(const MixtralLayerView* layer_weights,
                              trunk_->AcquireLayer(layer));
    // Released however the layer ends, so a failed step leaves the ring in
    // step for the next one.
    const absl::Cleanup release = [&] { trunk_->ReleaseLayer(layer); };
    const MixtralLayerView& w = *layer_weights;
    for (size_t t = 0; t < n; ++t) {
      kernels::RmsNorm(h.data() + t * e, w.input_norm, e, c.rms_norm_eps,
                       normed.data() + t * e);
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      FLOTILLA_RETURN_IF_ERROR(
          Attention(w, layer, normed.data() + offset[i] * e, ids[i]->size(),
                    seqs[i], delta.data() + offset[i] * e));
    }
    for (size_t k = 0; k < n * e; ++k) h[k] += delta[k];
    for (size_t t = 0; t < n; ++t) {
      kernels::RmsNorm(h.data() + t * e, w.post_norm, e, c.rms_norm_eps,
                       normed.data() + t * e);
    }
    FLOTILLA_RETURN_IF_ERROR(
        base::WithContext(Moe(layer, w, normed.data(), n, delta.data()),
                          absl::StrCat("experts of layer ", layer)));
    for (size_t k = 0; k < n * e; ++k) h[k] += delta[k];
    FLOTILLA_RETURN_IF_ERROR(check(h, e, "activation", nullptr));
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->positions += ids[i]->size();
  for (size_t r = 0; r < out_rows.size(); ++r) {
    kernels::RmsNorm(h.data() + out_rows[r] * e, trunk_->final_norm(), e,
                     c.rms_norm_eps, normed.data() + r * e);
  }
  logits->resize(out_rows.size() * v);
  kernels::MatMul(trunk_->lm_head(), normed.data(), out_rows.size(),
                  logits->data(), pool_.get());
  return check(*logits, v, "logit", &out_rows);
}

}  // namespace flotilla::coordinator
