#include "coordinator/families/kimi_k3/trunk.h"

#include "absl/strings/str_cat.h"
#include "coordinator/families/kimi_k3/region_binding.h"
#include "shared/base/status_macros.h"
#include "shared/family/kimi_k3/kimi_k3_schema.h"
#include "shared/pack/region_builder.h"

namespace flotilla::coordinator {

absl::StatusOr<std::unique_ptr<InMemoryTrunk>> InMemoryTrunk::Build(
    const model::TensorSource& source, const model::K3Config& config) {
  auto t = std::unique_ptr<InMemoryTrunk>(new InMemoryTrunk());
  FLOTILLA_ASSIGN_OR_RETURN(t->embed_region_, family::kimi_k3::BuildVocabRegion(
                                                  source, config, false));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->lm_head_region_,
      family::kimi_k3::BuildVocabRegion(source, config, true));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->globals_region_, family::kimi_k3::BuildGlobalsRegion(source, config));
  FLOTILLA_ASSIGN_OR_RETURN(t->embed_,
                            BindVocab(t->embed_region_.layout,
                                      t->embed_region_.bytes.data(), config));
  FLOTILLA_ASSIGN_OR_RETURN(t->lm_head_,
                            BindVocab(t->lm_head_region_.layout,
                                      t->lm_head_region_.bytes.data(), config));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->globals_, BindGlobals(t->globals_region_.layout,
                               t->globals_region_.bytes.data(), config));
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(pack::Region r, family::kimi_k3::BuildLayerRegion(
                                                  source, config, layer));
    t->layer_regions_.push_back(std::move(r));
  }
  // Bind after every region has its final address (the vector no longer
  // moves).
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    const pack::Region& r = t->layer_regions_[layer];
    FLOTILLA_ASSIGN_OR_RETURN(
        LayerWeights w, BindLayer(r.layout, r.bytes.data(), config, layer));
    t->layers_.push_back(w);
  }
  return t;
}

absl::StatusOr<const LayerWeights*> InMemoryTrunk::AcquireLayer(int layer) {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return absl::OutOfRangeError(absl::StrCat("no layer ", layer));
  }
  return &layers_[layer];
}

absl::Status InMemoryTrunk::EmbedRows(const std::vector<int32_t>& ids,
                                      float* out) {
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || static_cast<size_t>(ids[t]) >= embed_.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[t], " outside the embedding"));
    }
    embed_.RowF32(ids[t], out + t * embed_.cols);
  }
  return absl::OkStatus();
}

absl::Status InMemoryTrunk::LmHead(const float* x, size_t rows, float* logits,
                                   kernels::ThreadPool* pool) {
  kernels::MatMul(lm_head_.view(), x, rows, logits, pool);
  return absl::OkStatus();
}

uint64_t InMemoryTrunk::bytes() const {
  uint64_t total = embed_region_.layout.size + lm_head_region_.layout.size +
                   globals_region_.layout.size;
  for (const pack::Region& r : layer_regions_) total += r.layout.size;
  return total;
}

}  // namespace flotilla::coordinator
