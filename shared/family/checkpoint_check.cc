#include "shared/family/checkpoint_check.h"

#include <algorithm>
#include <set>
#include <unordered_set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "shared/model/tensor_names.h"

namespace flotilla::family {
namespace {

constexpr absl::string_view kLayers = "model.layers.";

// The decimal at the front of `s`, before its '.', or false.
bool LeadingIndex(absl::string_view s, int* index) {
  const size_t dot = s.find('.');
  if (dot == 0 || dot == absl::string_view::npos || dot > 9) return false;
  for (char c : s.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(s.substr(0, dot), index);
}

absl::Status Disagree(const std::string& source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": config.json and the checkpoint disagree: ", what));
}

}  // namespace

absl::Status CheckModelLayersCheckpoint(const FamilyConfig& config,
                                        const model::TensorSource& source,
                                        const std::string& source_name,
                                        const CheckpointFields& fields) {
  const model::MoeSpec moe = config.Moe();
  const int layers = moe.num_layers;
  // Layers past num_layers that the model never runs (DeepSeek-V3's MTP
  // layers) are recognised and skipped.
  const int mtp_end = layers + moe.unused_trailing_layers;
  int max_layer = -1, max_expert = -1;
  std::set<int> expert_layers;
  std::vector<std::string> trunk;
  source.ForEachTensor([&](const model::TensorInfo& t) {
    absl::string_view name = t.name;
    int layer = 0;
    if (absl::ConsumePrefix(&name, kLayers) && LeadingIndex(name, &layer)) {
      max_layer = std::max(max_layer, layer);
      if (layer >= layers) return;  // unused trailing, or refused below
      model::ExpertTensorName n;
      if (model::ParseExpertTensorName(t.name, &n) && n.layer == layer) {
        max_expert = std::max(max_expert, n.expert);
        expert_layers.insert(layer);
        return;
      }
    }
    trunk.push_back(t.name);
  });
  if (max_layer + 1 != mtp_end) {
    return Disagree(
        source_name,
        absl::StrCat("num_hidden_layers is ", layers,
                     moe.unused_trailing_layers > 0
                         ? absl::StrCat(" (and ", moe.unused_trailing_layers,
                                        " unused trailing)")
                         : "",
                     " but the checkpoint's tensors are of ", max_layer + 1,
                     " layers (0..", max_layer, ")"));
  }
  if (max_expert + 1 != moe.num_experts) {
    return Disagree(source_name,
                    absl::StrCat(fields.experts, " is ", moe.num_experts,
                                 " but the checkpoint's routed experts are 0..",
                                 max_expert));
  }
  std::vector<int> dense_with_experts, moe_without;
  for (int layer = 0; layer < layers; ++layer) {
    const bool has = expert_layers.count(layer) > 0;
    if (moe.IsDenseLayer(layer) && has) dense_with_experts.push_back(layer);
    if (!moe.IsDenseLayer(layer) && !has) moe_without.push_back(layer);
  }
  if (!dense_with_experts.empty() || !moe_without.empty()) {
    return Disagree(
        source_name,
        absl::StrCat(
            dense_with_experts.empty()
                ? ""
                : absl::StrCat("dense layers ",
                               absl::StrJoin(dense_with_experts, ","),
                               " have routed experts"),
            !dense_with_experts.empty() && !moe_without.empty() ? " and " : "",
            moe_without.empty()
                ? ""
                : absl::StrCat("MoE layers ", absl::StrJoin(moe_without, ","),
                               " have none"),
            " (check ", fields.dense_layers, ")"));
  }
  // Every other tensor is one the schema reads (a projection or its scales).
  std::unordered_set<std::string> read;
  auto add = [&](const std::vector<pack::FieldSpec>& schema) {
    for (const pack::FieldSpec& f : schema) read.insert(f.src);
  };
  for (int layer = 0; layer < layers; ++layer) add(config.LayerSchema(layer));
  add(config.VocabSchema(false));
  add(config.VocabSchema(true));
  add(config.GlobalsSchema());
  std::vector<std::string> unused;
  for (const std::string& name : trunk) {
    if (read.count(name) == 0) unused.push_back(name);
  }
  if (!unused.empty()) {
    const size_t n = unused.size();
    unused.resize(std::min<size_t>(n, 3));
    return Disagree(
        source_name,
        absl::StrCat(n, " tensor", n == 1 ? "" : "s",
                     " of the checkpoint would not be used by this config (",
                     absl::StrJoin(unused, ", "), n > 3 ? ", ..." : "",
                     "); check ", fields.hint, " against the checkpoint"));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::family
