#include "shared/family/kimi_k3/kimi_k3_checkpoint_check.h"

#include <algorithm>
#include <set>
#include <unordered_set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "shared/family/kimi_k3/kimi_k3_schema.h"
#include "shared/model/tensor_names.h"

namespace flotilla::family::kimi_k3 {
namespace {

using pack::FieldKind;
using pack::FieldSpec;
using pack::kAllLayerParts;

constexpr absl::string_view kLayers = "language_model.model.layers.";
constexpr absl::string_view kIgnored[] = {"vision_tower.", "mm_projector.",
                                          "multi_modal_projector."};

// The decimal at the front of `s` (and what follows its '.'), or false.
bool LeadingIndex(absl::string_view s, int* index, absl::string_view* rest) {
  const size_t dot = s.find('.');
  if (dot == 0 || dot == absl::string_view::npos || dot > 9) return false;
  for (char c : s.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
  }
  if (!absl::SimpleAtoi(s.substr(0, dot), index)) return false;
  *rest = s.substr(dot + 1);
  return true;
}

absl::Status Disagree(const std::string& source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": config.json and the checkpoint disagree: ", what));
}

}  // namespace

absl::Status CheckCheckpoint(const model::K3Config& c,
                             const model::TensorSource& source,
                             const std::string& source_name) {
  int max_layer = -1, max_expert = -1;
  std::set<int> expert_layers;
  std::vector<std::string> trunk;  // not a routed expert, not ignored
  source.ForEachTensor([&](const model::TensorInfo& t) {
    absl::string_view name = t.name;
    for (absl::string_view prefix : kIgnored) {
      if (absl::StartsWith(name, prefix)) return;
    }
    int layer = 0;
    absl::string_view rest;
    if (absl::ConsumePrefix(&name, kLayers) &&
        LeadingIndex(name, &layer, &rest)) {
      max_layer = std::max(max_layer, layer);
      model::ExpertTensorName n;
      if (model::ParseExpertTensorName(t.name, &n) && n.layer == layer) {
        max_expert = std::max(max_expert, n.expert);
        expert_layers.insert(layer);
        return;
      }
    }
    trunk.push_back(t.name);
  });
  if (max_layer + 1 != c.num_hidden_layers) {
    return Disagree(
        source_name,
        absl::StrCat("num_hidden_layers is ", c.num_hidden_layers,
                     " but the checkpoint's tensors are of ", max_layer + 1,
                     " layers (0..", max_layer, ")"));
  }
  if (max_expert + 1 != c.num_experts) {
    return Disagree(source_name,
                    absl::StrCat("num_experts is ", c.num_experts,
                                 " but the checkpoint's routed experts are 0..",
                                 max_expert));
  }
  std::vector<int> dense_with_experts, moe_without;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const bool has = expert_layers.count(layer) > 0;
    if (c.IsDenseLayer(layer) && has) dense_with_experts.push_back(layer);
    if (!c.IsDenseLayer(layer) && !has) moe_without.push_back(layer);
  }
  if (!dense_with_experts.empty() || !moe_without.empty()) {
    return Disagree(
        source_name,
        absl::StrCat(
            "first_k_dense_replace is ", c.first_k_dense_replace,
            dense_with_experts.empty()
                ? ""
                : absl::StrCat(", but dense layers ",
                               absl::StrJoin(dense_with_experts, ","),
                               " have routed experts"),
            moe_without.empty()
                ? ""
                : absl::StrCat(", but MoE layers ",
                               absl::StrJoin(moe_without, ","), " have none")));
  }
  // Now the counts are the checkpoint's own: the schema's loops are bounded.
  std::unordered_set<std::string> read;
  auto add = [&](const std::vector<FieldSpec>& schema) {
    for (const FieldSpec& f : schema) {
      if (f.kind == FieldKind::kUkT) continue;  // built from another field
      read.insert(f.src);
      if (!f.src2.empty()) read.insert(f.src2);
    }
  };
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    add(LayerSchema(c, layer, kAllLayerParts));
  }
  add(VocabSchema(c, false));
  add(VocabSchema(c, true));
  add(GlobalsSchema(c));
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
                     "); check num_shared_experts, full_attn_layers and "
                     "first_k_dense_replace against the checkpoint"));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::family::kimi_k3
