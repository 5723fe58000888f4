// Tensor sources that are not safetensors checkpoints:
//  * FlatF32Source reads the reference "tiny_k3" oracle format: a JSON index
//    {config, tensors: {name: {offset, shape, numel}}} whose offsets count
//    float32 elements into one raw little-endian .bin file;
//  * MemoryTensorSource holds float32 tensors in memory (tests build layer
//    fixtures with it).
// Both expose tensors under Hugging Face K3 names, translating the
// reference's underscore module paths (layers_1_mlp_experts_3_w2_weight)
// with FlatNameToHf.
#ifndef FLOTILLA_SHARED_TESTING_FLAT_F32_SOURCE_H_
#define FLOTILLA_SHARED_TESTING_FLAT_F32_SOURCE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shared/model/tensor_source.h"

namespace flotilla::model {

// Translates a reference-model tensor name to its HF checkpoint name, e.g.
// "layers_1_mlp_down_weight" -> "language_model.model.layers.1.
// block_sparse_moe.routed_expert_down_proj.weight". `dense_layers` tells
// whether a layer's mlp_* names are a dense FFN (first_k_dense_replace).
// Returns an empty string for names it does not know.
std::string FlatNameToHf(const std::string& flat_name, int dense_layers);

// Same translation for a name inside one layer ("self_attn_q_proj_weight"),
// given the layer index.
std::string FlatLayerNameToHf(const std::string& name, int layer,
                              bool dense_ffn);

class MemoryTensorSource : public TensorSource {
 public:
  // Adds a float32 tensor under `hf_name`.
  void Add(const std::string& hf_name, std::vector<int64_t> shape,
           std::vector<float> data);

  const TensorInfo* Find(absl::string_view name) const override;
  std::vector<std::string> Names() const override;
  absl::Status ReadRaw(const TensorInfo& info, void* dst) const override;

 private:
  std::map<std::string, TensorInfo, std::less<>> infos_;
  std::map<std::string, std::vector<float>, std::less<>> data_;
};

class FlatF32Source : public TensorSource {
 public:
  // index_json: path of tiny_k3.json; bin: path of tiny_k3.bin. Every
  // tensor must lie inside the .bin file.
  static absl::StatusOr<std::unique_ptr<FlatF32Source>> Open(
      const std::string& index_json, const std::string& bin);

  const TensorInfo* Find(absl::string_view name) const override;
  std::vector<std::string> Names() const override;
  absl::Status ReadRaw(const TensorInfo& info, void* dst) const override;

  // The "config" object of the index, re-serialised as JSON text.
  const std::string& config_json() const { return config_json_; }

 private:
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::string config_json_;
};

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_TESTING_FLAT_F32_SOURCE_H_
