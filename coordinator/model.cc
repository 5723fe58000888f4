#include "coordinator/model.h"

#include "absl/strings/str_cat.h"
#include "coordinator/decoder_layer.h"
#include "coordinator/local_experts.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/kernels.h"
#include "shared/model/safetensors.h"

namespace flotilla::coordinator {

size_t SequenceState::bytes() const {
  size_t total = 0;
  for (const KdaState& k : kda) {
    total += (k.s.size() + k.conv_q.size() + k.conv_k.size() +
              k.conv_v.size()) * sizeof(float);
  }
  for (const MlaCache& m : mla) total += m.bytes();
  return total;
}

absl::StatusOr<std::unique_ptr<K3Model>> K3Model::Load(
    std::unique_ptr<model::TensorSource> source,
    const model::K3Config& config, const ModelOptions& options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 1, got ", options.threads));
  }
  auto m = std::unique_ptr<K3Model>(new K3Model());
  m->config_ = config;
  m->source_ = std::move(source);
  m->pool_ = std::make_unique<kernels::ThreadPool>(options.threads);
  FLOTILLA_ASSIGN_OR_RETURN(m->weights_,
                            LoadModelWeights(*m->source_, config));
  FLOTILLA_ASSIGN_OR_RETURN(
      auto experts,
      LocalExperts::Create(m->source_.get(), config, m->pool_.get()));
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

absl::Status K3Model::Forward(SequenceState* state,
                              const std::vector<int32_t>& ids,
                              bool all_positions,
                              std::vector<float>* logits) {
  const model::K3Config& c = config_;
  const size_t e = c.hidden_size, v = c.vocab_size, n = ids.size();
  if (n == 0) return absl::InvalidArgumentError("no tokens to process");
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at position ", i,
                       " is outside the vocabulary [0, ", c.vocab_size, ")"));
    }
  }
  ResidualStreams streams;
  streams.steps = static_cast<int>(n);
  streams.partial.resize(n * e);
  for (size_t t = 0; t < n; ++t) {
    weights_.embed.RowF32(ids[t], streams.partial.data() + t * e);
  }
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    FLOTILLA_RETURN_IF_ERROR(DecoderLayerForward(
        weights_.layers[layer], c, layer, &streams, &state->kda[layer],
        &state->mla[layer], experts_.get(), pool_.get()));
  }
  state->positions += n;

  // Head: only the rows whose logits are wanted.
  const size_t first = all_positions ? 0 : n - 1;
  const size_t rows = n - first;
  std::vector<float> hf(n * e), normed(rows * e);
  AggregateAll(streams, weights_.out_res_fold.data(), e, c.rms_norm_eps,
               hf.data());
  for (size_t r = 0; r < rows; ++r) {
    kernels::RmsNorm(hf.data() + (first + r) * e, weights_.final_norm.data(),
                     e, c.rms_norm_eps, normed.data() + r * e);
  }
  logits->resize(rows * v);
  kernels::MatMul(weights_.lm_head.view(), normed.data(), rows,
                  logits->data(), pool_.get());
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator
