#include "coordinator/families/deepseek_v3/deepseek_v3_model.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "coordinator/model/batched_step.h"
#include "coordinator/model/decoder_step.h"
#include "coordinator/model/state_codec.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {

size_t DeepSeekV3Sequence::bytes() const {
  size_t total = 0;
  for (const LatentCache& c : layers) total += c.bytes();
  return total;
}

absl::Status DeepSeekV3Sequence::Save(std::string* out) const {
  state_codec::PutHeader(out, positions, layers.size());
  for (const LatentCache& c : layers) {
    state_codec::PutFloats(out, c.c_kv);
    state_codec::PutFloats(out, c.k_rope);
  }
  return absl::OkStatus();
}

bool DeepSeekV3Sequence::Truncate(size_t n) {
  if (n > positions) return false;
  for (LatentCache& c : layers) {
    if (c.positions != positions) return false;  // not every layer fed
  }
  for (LatentCache& c : layers) {
    if (c.positions == 0) continue;
    const size_t kv_width = c.c_kv.size() / c.positions;
    const size_t rope_width = c.k_rope.size() / c.positions;
    c.c_kv.resize(n * kv_width);
    c.k_rope.resize(n * rope_width);
    c.positions = n;
  }
  positions = n;
  return true;
}

std::unique_ptr<DeepSeekV3Model> DeepSeekV3Model::Create(
    const model::DeepSeekV3Config& c, std::unique_ptr<RegionTrunk> trunk,
    std::unique_ptr<kernels::ThreadPool> pool,
    std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive) {
  auto m = std::unique_ptr<DeepSeekV3Model>(new DeepSeekV3Model(c));
  m->keep_alive_ = std::move(keep_alive);
  m->pool_ = std::move(pool);
  m->trunk_ = std::move(trunk);
  m->experts_ = std::move(experts);
  m->attention_ = DeepSeekV3AttentionSpec(c);
  RouterSpec& r = m->router_;
  r.scoring = RouterSpec::Scoring::kSigmoid;
  r.num_experts = c.n_routed_experts;
  r.top_k = c.num_experts_per_tok;
  r.renormalize = c.norm_topk_prob;
  r.renormalize_epsilon = 1e-20;  // upstream's denominator guard
  r.scaling = c.routed_scaling_factor;
  r.num_groups = c.n_group;
  r.top_groups = c.topk_group;
  return m;
}

std::unique_ptr<ModelSequence> DeepSeekV3Model::StartSequence() const {
  auto s = std::make_unique<DeepSeekV3Sequence>();
  s->layers.resize(config_.num_hidden_layers);
  return s;
}

absl::StatusOr<std::unique_ptr<ModelSequence>> DeepSeekV3Model::LoadSequence(
    absl::string_view bytes) const {
  state_codec::Reader in(bytes);
  auto s = std::make_unique<DeepSeekV3Sequence>();
  const uint64_t layers = config_.num_hidden_layers;
  FLOTILLA_ASSIGN_OR_RETURN(
      const uint64_t positions,
      in.Header(layers,
                static_cast<uint64_t>(config_.max_position_embeddings)));
  s->positions = positions;
  s->layers.resize(layers);
  for (LatentCache& c : s->layers) {
    FLOTILLA_RETURN_IF_ERROR(
        in.Floats(positions * config_.kv_lora_rank, &c.c_kv, "latents"));
    FLOTILLA_RETURN_IF_ERROR(in.Floats(positions * config_.qk_rope_head_dim,
                                       &c.k_rope, "rope keys"));
    c.positions = positions;
  }
  FLOTILLA_RETURN_IF_ERROR(in.Finish());
  return std::unique_ptr<ModelSequence>(std::move(s));
}

void DeepSeekV3Model::SwiGlu(const DeepSeekV3Layer& w, const float* x, size_t n,
                             float* out) {
  const size_t inter = w.gate.rows();
  std::vector<float> g(n * inter), u(n * inter);
  kernels::MatMul(w.gate, x, n, g.data(), pool_.get());
  kernels::MatMul(w.up, x, n, u.data(), pool_.get());
  const float inf = std::numeric_limits<float>::infinity();
  kernels::SituGlu(g.data(), u.data(), n * inter, inf, inf, g.data());
  kernels::MatMul(w.down, g.data(), n, out, pool_.get());
}

absl::Status DeepSeekV3Model::Moe(int layer, const DeepSeekV3Layer& w,
                                  const float* normed, size_t n, float* out) {
  const size_t e = config_.hidden_size;
  std::vector<float> logits(n * config_.n_routed_experts);
  kernels::MatMul(w.router, normed, n, logits.data(), pool_.get());
  std::vector<ExpertTask> tasks;
  Route(router_, logits.data(), w.router_bias, n, &tasks);
  // The shared experts first: they need no routed expert's bytes.
  std::vector<float> shared(w.has_ffn ? n * e : 0);
  if (w.has_ffn) SwiGlu(w, normed, n, shared.data());
  FLOTILLA_RETURN_IF_ERROR(
      experts_->ComputeLayer(layer, normed, static_cast<int>(n), tasks, out));
  experts_->RecordRouted(layer, tasks.size());
  for (size_t k = 0; k < shared.size(); ++k) out[k] += shared[k];
  return absl::OkStatus();
}

absl::Status DeepSeekV3Model::Step(
    const std::vector<DeepSeekV3Sequence*>& seqs,
    const std::vector<const std::vector<int32_t>*>& ids,
    const std::vector<size_t>& out_rows, std::vector<float>* logits) {
  const model::DeepSeekV3Config& c = config_;
  return RunDecoderStep<DeepSeekV3Layer>(
      *trunk_, c.num_hidden_layers, c.hidden_size, c.rms_norm_eps, seqs, ids,
      out_rows, logits, pool_.get(),
      [&](const DeepSeekV3Layer& w, int layer, const StepRows& step,
          const float* x, float* out) {
        std::vector<LatentCache*> caches;
        for (DeepSeekV3Sequence* seq : seqs) {
          caches.push_back(&seq->layers[layer]);
        }
        LatentAttentionRows(attention_, w.attention, x, step.offset, caches,
                            out, pool_.get());
      },
      [&](const DeepSeekV3Layer& w, int layer, const float* x, size_t rows,
          float* out) -> absl::Status {
        if (!w.moe) {
          SwiGlu(w, x, rows, out);
          return absl::OkStatus();
        }
        return base::WithContext(Moe(layer, w, x, rows, out),
                                 absl::StrCat("experts of layer ", layer));
      });
}

}  // namespace flotilla::coordinator
