#include "coordinator/families/kimi_k3/model.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/families/kimi_k3/decoder_layer.h"
#include "coordinator/model/batched_step.h"
#include "coordinator/model/decoder_step.h"
#include "coordinator/model/local_experts.h"
#include "coordinator/model/state_codec.h"
#include "shared/base/status_macros.h"
#include "shared/family/kimi_k3/kimi_k3_checkpoint_check.h"
#include "shared/kernels/kernels.h"
#include "shared/model/safetensors.h"

namespace flotilla::coordinator {

std::unique_ptr<ModelSequence> SequenceState::Clone() const {
  auto copy = std::make_unique<SequenceState>(*this);
  for (KdaState& k : copy->kda) {
    k.keep_undo = false;
    k.undo = KdaState::Undo();
  }
  return copy;
}

bool SequenceState::PrepareUndo(size_t) {
  if (config == nullptr) return false;
  for (KdaState& k : kda) k.keep_undo = true;
  return true;
}

bool SequenceState::Truncate(size_t n) {
  if (config == nullptr || n > positions) return false;
  const model::K3Config& c = *config;
  for (size_t l = 0; l < kda.size(); ++l) {
    if (c.IsMlaLayer(static_cast<int>(l))) continue;
    const KdaState& k = kda[l];
    if (!k.keep_undo || positions - n > static_cast<size_t>(k.undo.steps)) {
      return false;  // not within the last forward
    }
  }
  for (size_t l = 0; l < kda.size(); ++l) {
    if (c.IsMlaLayer(static_cast<int>(l))) {
      MlaCache& m = mla[l];
      m.c_kv.resize(n * c.kv_lora_rank);
      m.k_rope.resize(n * c.qk_rope_head_dim);
      m.positions = n;
    } else {
      KdaState& k = kda[l];
      const int keep = k.undo.steps - static_cast<int>(positions - n);
      KdaUndo(c, keep, &k);
      k.undo.steps = 0;
    }
  }
  positions = n;
  return true;
}

size_t SequenceState::bytes() const {
  size_t total = 0;
  for (const KdaState& k : kda) {
    total +=
        (k.s.size() + k.conv_q.size() + k.conv_k.size() + k.conv_v.size()) *
        sizeof(float);
    const KdaState::Undo& u = k.undo;
    for (const std::vector<float>* v :
         {&u.s, &u.conv_q, &u.conv_k, &u.conv_v, &u.pre_q, &u.pre_k, &u.pre_v,
          &u.q, &u.k, &u.v, &u.alpha, &u.beta}) {
      total += v->capacity() * sizeof(float);
    }
  }
  for (const MlaCache& m : mla) total += m.bytes();
  return total;
}

absl::StatusOr<std::unique_ptr<K3Model>> K3Model::Load(
    std::unique_ptr<model::TensorSource> source, const model::K3Config& config,
    const ModelOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 1, got ", options.threads));
  }
  std::shared_ptr<model::TensorSource> shared_source(std::move(source));
  auto pool = std::make_unique<kernels::ThreadPool>(options.threads);
  FLOTILLA_ASSIGN_OR_RETURN(auto trunk,
                            InMemoryTrunk::Build(*shared_source, config));
  const uint64_t trunk_bytes = trunk->bytes();
  FLOTILLA_ASSIGN_OR_RETURN(
      auto experts,
      LocalExperts::Create(shared_source.get(), config.Moe(), pool.get()));
  auto m = FromParts(config, std::move(pool), std::move(trunk),
                     std::move(experts), shared_source);
  m->resident_trunk_bytes_ = trunk_bytes;
  return m;
}

std::unique_ptr<K3Model> K3Model::FromParts(
    const model::K3Config& config, std::unique_ptr<kernels::ThreadPool> pool,
    std::unique_ptr<TrunkProvider> trunk,
    std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive) {
  auto m = std::unique_ptr<K3Model>(new K3Model());
  m->config_ = config;
  m->keep_alive_ = std::move(keep_alive);
  m->pool_ = std::move(pool);
  m->trunk_ = std::move(trunk);
  m->experts_ = std::move(experts);
  return m;
}

absl::StatusOr<std::unique_ptr<K3Model>> K3Model::OpenDir(
    const std::string& dir, const std::string& config_path,
    const ModelOptions& options) {
  FLOTILLA_ASSIGN_OR_RETURN(
      model::K3Config config,
      model::LoadK3Config(config_path.empty() ? dir + "/config.json"
                                              : config_path));
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(dir));
  FLOTILLA_RETURN_IF_ERROR(
      family::kimi_k3::CheckCheckpoint(config, *source, dir));
  return Load(std::move(source), config, options);
}

absl::Status SequenceState::Save(std::string* out) const {
  state_codec::PutU64(out, positions);
  state_codec::PutU64(out, kda.size());
  for (size_t l = 0; l < kda.size(); ++l) {
    for (const std::vector<float>* v :
         {&kda[l].s, &kda[l].conv_q, &kda[l].conv_k, &kda[l].conv_v,
          &mla[l].c_kv, &mla[l].k_rope}) {
      state_codec::PutFloats(out, *v);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelSequence>> K3Model::LoadSequence(
    absl::string_view bytes) const {
  state_codec::Reader in(bytes);
  // A fresh state has every fixed-size array at its size; the MLA caches
  // hold one row per position.
  auto s = std::make_unique<SequenceState>(NewSequence());
  FLOTILLA_ASSIGN_OR_RETURN(const uint64_t positions, in.U64());
  FLOTILLA_ASSIGN_OR_RETURN(const uint64_t layers, in.U64());
  if (layers != s->kda.size() || positions > (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "saved state: ", layers, " layers and ", positions,
        " positions do not fit this model (", s->kda.size(), " layers)"));
  }
  s->positions = positions;
  for (size_t l = 0; l < layers; ++l) {
    KdaState& k = s->kda[l];
    FLOTILLA_RETURN_IF_ERROR(in.Floats(k.s.size(), &k.s, "the KDA state"));
    FLOTILLA_RETURN_IF_ERROR(in.Floats(k.conv_q.size(), &k.conv_q, "conv_q"));
    FLOTILLA_RETURN_IF_ERROR(in.Floats(k.conv_k.size(), &k.conv_k, "conv_k"));
    FLOTILLA_RETURN_IF_ERROR(in.Floats(k.conv_v.size(), &k.conv_v, "conv_v"));
    const bool mla = config_.IsMlaLayer(static_cast<int>(l));
    MlaCache& m = s->mla[l];
    FLOTILLA_RETURN_IF_ERROR(in.Floats(
        mla ? positions * config_.kv_lora_rank : 0, &m.c_kv, "the MLA cache"));
    FLOTILLA_RETURN_IF_ERROR(in.Floats(
        mla ? positions * config_.qk_rope_head_dim : 0, &m.k_rope, "k_rope"));
    m.positions = mla ? positions : 0;
  }
  FLOTILLA_RETURN_IF_ERROR(in.Finish());
  return std::unique_ptr<ModelSequence>(std::move(s));
}

SequenceState K3Model::NewSequence() const {
  SequenceState s;
  s.config = &config_;
  s.kda.resize(config_.num_hidden_layers);
  s.mla.resize(config_.num_hidden_layers);
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    if (!config_.IsMlaLayer(layer)) InitKdaState(config_, &s.kda[layer]);
  }
  return s;
}

absl::StatusOr<SequenceState*> K3Model::CheckInput(
    ModelSequence* sequence, const std::vector<int32_t>& ids) const {
  auto* state = dynamic_cast<SequenceState*>(sequence);
  if (state == nullptr) {
    return absl::InvalidArgumentError(
        "the sequence was not started by this Kimi K3 model");
  }
  FLOTILLA_RETURN_IF_ERROR(CheckTokenIds(ids, config_.vocab_size));
  return state;
}

absl::Status K3Model::Forward(ModelSequence* sequence,
                              const std::vector<int32_t>& ids,
                              bool all_positions, std::vector<float>* logits) {
  FLOTILLA_ASSIGN_OR_RETURN(SequenceState * state, CheckInput(sequence, ids));
  return Forward(state, ids, all_positions, logits);
}

absl::Status K3Model::Forward(SequenceState* state,
                              const std::vector<int32_t>& ids,
                              bool all_positions, std::vector<float>* logits) {
  FLOTILLA_RETURN_IF_ERROR(CheckTokenIds(ids, config_.vocab_size));
  std::vector<size_t> rows;
  for (size_t r = all_positions ? 0 : ids.size() - 1; r < ids.size(); ++r) {
    rows.push_back(r);
  }
  return Step({state}, {&ids}, rows, logits);
}

absl::Status K3Model::ForwardBatch(
    const std::vector<ModelSequence*>& sequences,
    const std::vector<std::vector<int32_t>>& ids,
    std::vector<std::vector<float>>* last_logits) {
  return RunBatchedStep<SequenceState>(
      sequences, ids, config_.vocab_size,
      [this](ModelSequence* s, const std::vector<int32_t>& i) {
        return CheckInput(s, i);
      },
      [this](const std::vector<SequenceState*>& states,
             const std::vector<const std::vector<int32_t>*>& lists,
             const std::vector<size_t>& rows, std::vector<float>* logits) {
        return Step(states, lists, rows, logits);
      },
      last_logits);
}

absl::Status K3Model::Step(const std::vector<SequenceState*>& states,
                           const std::vector<const std::vector<int32_t>*>& ids,
                           const std::vector<size_t>& out_rows,
                           std::vector<float>* logits) {
  const model::K3Config& c = config_;
  const size_t e = c.hidden_size, v = c.vocab_size;
  // The step's rows: each sequence's new tokens, one sequence after another.
  std::vector<int32_t> all_ids;
  std::vector<size_t> first;
  for (size_t i = 0; i < ids.size(); ++i) {
    all_ids.insert(all_ids.end(), ids[i]->begin(), ids[i]->end());
    first.push_back(states[i]->positions);
  }
  const StepRows step = LayOutStep(first, ids);
  const size_t n = step.size();
  ResidualStreams streams;
  streams.steps = static_cast<int>(n);
  streams.partial.resize(n * e);
  FLOTILLA_RETURN_IF_ERROR(trunk_->BeginStep());
  FLOTILLA_RETURN_IF_ERROR(trunk_->EmbedRows(all_ids, streams.partial.data()));
  StepSequences sequences;
  sequences.offsets = step.offset;
  sequences.kda.resize(states.size());
  sequences.mla.resize(states.size());
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    for (size_t i = 0; i < states.size(); ++i) {
      sequences.kda[i] = &states[i]->kda[layer];
      sequences.mla[i] = &states[i]->mla[layer];
    }
    FLOTILLA_ASSIGN_OR_RETURN(const LayerWeights* w,
                              trunk_->AcquireLayer(layer));
    // The disk idles while attention computes: start reading the experts
    // this layer will probably route to now (a guess; see
    // PredictLayerExperts), so their reads overlap attention.
    absl::Status s;
    if (expert_lookahead_ && !w->is_dense) {
      s = experts_->PrefetchLayer(
          layer,
          PredictLayerExperts(*w, c, streams, lookahead_extra_, pool_.get()));
    }
    if (s.ok()) {
      s = DecoderLayerForward(*w, c, layer, &streams, sequences, experts_.get(),
                              pool_.get());
    }
    if (s.ok()) {
      s = CheckFinite(streams.partial, e,
                      absl::StrCat("activation after layer ", layer).c_str(),
                      step, nullptr);
    }
    trunk_->ReleaseLayer(layer);
    FLOTILLA_RETURN_IF_ERROR(s);
  }
  for (size_t i = 0; i < states.size(); ++i) {
    states[i]->positions += ids[i]->size();
  }

  // Head: only the rows whose logits are wanted.
  const size_t rows = out_rows.size();
  std::vector<float> hf(n * e), normed(rows * e);
  const GlobalWeights& g = trunk_->globals();
  AggregateAll(streams, g.out_res_fold.data(), e, c.rms_norm_eps, hf.data());
  for (size_t r = 0; r < rows; ++r) {
    kernels::RmsNorm(hf.data() + out_rows[r] * e, g.final_norm.data(), e,
                     c.rms_norm_eps, normed.data() + r * e);
  }
  logits->resize(rows * v);
  FLOTILLA_RETURN_IF_ERROR(
      trunk_->LmHead(normed.data(), rows, logits->data(), pool_.get()));
  return CheckFinite(*logits, v, "logit", step, &out_rows);
}

}  // namespace flotilla::coordinator
