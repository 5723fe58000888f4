#include "coordinator/model/model.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/model/decoder_layer.h"
#include "coordinator/model/local_experts.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"
#include "shared/model/safetensors.h"

namespace flotilla::coordinator {
namespace {

// An error naming where the first non-finite value of rows [n][width] is,
// or OK. NaN weights otherwise flow into the logits, where the greedy
// argmax of all-NaN logits is id 0 forever: wrong output, no error. One
// pass over the residual per layer is noise next to the layer's matmuls.
absl::Status CheckFinite(const float* rows, size_t n, size_t width,
                         const std::string& what, int64_t first_position) {
  for (size_t i = 0; i < n * width; ++i) {
    if (!std::isfinite(rows[i])) {
      return absl::DataLossError(absl::StrCat(
          "non-finite ", what, " (", rows[i], ") at position ",
          first_position + static_cast<int64_t>(i / width), ", element ",
          i % width, ": the weights or the computation are broken"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

size_t SequenceState::bytes() const {
  size_t total = 0;
  for (const KdaState& k : kda) {
    total +=
        (k.s.size() + k.conv_q.size() + k.conv_k.size() + k.conv_v.size()) *
        sizeof(float);
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
  return Load(std::move(source), config, options);
}

SequenceState K3Model::NewSequence() const {
  SequenceState s;
  s.kda.resize(config_.num_hidden_layers);
  s.mla.resize(config_.num_hidden_layers);
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    if (!config_.IsMlaLayer(layer)) InitKdaState(config_, &s.kda[layer]);
  }
  return s;
}

absl::Status K3Model::Forward(ModelSequence* sequence,
                              const std::vector<int32_t>& ids,
                              bool all_positions, std::vector<float>* logits) {
  auto* state = dynamic_cast<SequenceState*>(sequence);
  if (state == nullptr) {
    return absl::InvalidArgumentError(
        "the sequence was not started by this Kimi K3 model");
  }
  return Forward(state, ids, all_positions, logits);
}

absl::Status K3Model::Forward(SequenceState* state,
                              const std::vector<int32_t>& ids,
                              bool all_positions, std::vector<float>* logits) {
  const model::K3Config& c = config_;
  const size_t e = c.hidden_size, v = c.vocab_size, n = ids.size();
  FLOTILLA_RETURN_IF_ERROR(CheckTokenIds(ids, c.vocab_size));
  ResidualStreams streams;
  streams.steps = static_cast<int>(n);
  streams.partial.resize(n * e);
  FLOTILLA_RETURN_IF_ERROR(trunk_->BeginStep());
  FLOTILLA_RETURN_IF_ERROR(trunk_->EmbedRows(ids, streams.partial.data()));
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
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
      s = DecoderLayerForward(*w, c, layer, &streams, &state->kda[layer],
                              &state->mla[layer], experts_.get(), pool_.get());
    }
    if (s.ok()) {
      s = CheckFinite(streams.partial.data(), n, e,
                      absl::StrCat("activation after layer ", layer),
                      state->positions);
    }
    trunk_->ReleaseLayer(layer);
    FLOTILLA_RETURN_IF_ERROR(s);
  }
  const int64_t first_position = state->positions;
  state->positions += n;

  // Head: only the rows whose logits are wanted.
  const size_t first = all_positions ? 0 : n - 1;
  const size_t rows = n - first;
  std::vector<float> hf(n * e), normed(rows * e);
  const GlobalWeights& g = trunk_->globals();
  AggregateAll(streams, g.out_res_fold.data(), e, c.rms_norm_eps, hf.data());
  for (size_t r = 0; r < rows; ++r) {
    kernels::RmsNorm(hf.data() + (first + r) * e, g.final_norm.data(), e,
                     c.rms_norm_eps, normed.data() + r * e);
  }
  logits->resize(rows * v);
  FLOTILLA_RETURN_IF_ERROR(
      trunk_->LmHead(normed.data(), rows, logits->data(), pool_.get()));
  return CheckFinite(logits->data(), rows, v, "logit",
                     first_position + static_cast<int64_t>(first));
}

}  // namespace flotilla::coordinator
