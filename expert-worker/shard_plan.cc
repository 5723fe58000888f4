#include "expert-worker/shard_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/base/status_macros.h"
#include "shared/family/family.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/moe_spec.h"
#include "shared/model/safetensors.h"
#include "shared/pack/pack_manifest.h"
#include "shared/pack/pack_source.h"
#include "shared/placement/placement.h"

namespace flotilla::expert_worker {

namespace fs = std::filesystem;

absl::StatusOr<ShardSpec> ParseShardSpec(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  ShardSpec spec;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &spec.index) ||
      !absl::SimpleAtoi(parts[1], &spec.count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected K/N (shard K of N, zero-based K), got '", text, "'"));
  }
  if (spec.count < 1 || spec.index < 0 || spec.index >= spec.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard '", text, "' needs N >= 1 and 0 <= K < N"));
  }
  return spec;
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < rest.size() &&
         absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  uint64_t value = 0;
  if (digits == 0 || !absl::SimpleAtoi(rest.substr(0, digits), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a byte size such as 8G, 512M or 1073741824, got '", text,
        "'"));
  }
  std::string suffix = absl::AsciiStrToUpper(rest.substr(digits));
  int shift = 0;
  if (!suffix.empty()) {
    const std::string unit = suffix.substr(0, 1);
    const std::string tail = suffix.substr(1);
    if (unit == "B" && tail.empty()) {
      shift = 0;
    } else if (tail.empty() || tail == "B" || tail == "IB") {
      if (unit == "K")
        shift = 10;
      else if (unit == "M")
        shift = 20;
      else if (unit == "G")
        shift = 30;
      else if (unit == "T")
        shift = 40;
      else
        shift = -1;
    } else {
      shift = -1;
    }
    if (shift < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown size suffix in '", text, "' (use K, M, G or T)"));
    }
  }
  if (value == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size must be > 0, got '", text, "'"));
  }
  if (value >
      (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) >> shift)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size '", text, "' is too large"));
  }
  return value << shift;
}

namespace {

// The plan of a split worker: slice split.worker of every expert.
absl::Status FillSplitPlan(const PlanOptions& o,
                           const std::vector<int>& moe_layers,
                           ShardPlan* plan) {
  if (!o.placement_file.empty() || o.replicas != 1) {
    return absl::InvalidArgumentError(
        "--split cannot be combined with --placement or --replicas (a split "
        "fleet holds every expert once, cut by rows)");
  }
  FLOTILLA_ASSIGN_OR_RETURN(placement::ExpertSplit split,
                            placement::ExpertSplit::Load(o.split_file));
  const model::MoeSpec& c = plan->config;
  if (split.intermediate != static_cast<uint64_t>(c.intermediate_size) ||
      split.latent != static_cast<uint64_t>(c.hidden_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.split_file, " cuts experts of intermediate size ", split.intermediate,
        " and latent width ", split.latent, " but ", o.model_dir,
        "/config.json has ", c.intermediate_size, " and ", c.hidden_size));
  }
  if (o.shard_given &&
      (o.shard.index != split.worker || o.shard.count != split.workers)) {
    return absl::OutOfRangeError(absl::StrCat(
        "shard ", o.shard.index, "/", o.shard.count, " disagrees with ",
        o.split_file, " (worker ", split.worker, " of ", split.workers, ")"));
  }
  if (split.source_fingerprint.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.split_file, " does not name the checkpoint it was cut from"));
  }
  plan->shard = ShardSpec{split.worker, split.workers};
  plan->replicas = 1;
  plan->placement = o.split_file;
  // The slices are a re-cut of the source checkpoint, which pack
  // fingerprinted when it wrote them.
  plan->model_fingerprint = split.source_fingerprint;
  std::vector<uint32_t> all(c.num_experts);
  for (int e = 0; e < c.num_experts; ++e) all[e] = static_cast<uint32_t>(e);
  for (int layer : moe_layers) plan->owned_experts[layer] = all;
  plan->split = std::move(split);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardPlan> BuildShardPlan(const PlanOptions& o) {
  ShardPlan plan;
  plan.model_dir = o.model_dir;
  FLOTILLA_ASSIGN_OR_RETURN(
      plan.config,
      family::LoadMoeSpec((fs::path(o.model_dir) / "config.json").string()));
  const model::MoeSpec& c = plan.config;
  std::vector<int> moe_layers;
  for (int layer = 0; layer < c.num_layers; ++layer) {
    if (!c.IsDenseLayer(layer)) moe_layers.push_back(layer);
  }
  plan.num_layers = c.num_layers;
  plan.num_experts = c.num_experts;
  plan.row_width = c.hidden_size;
  plan.memory_budget_bytes = o.memory_budget_bytes;
  plan.compute_threads = o.compute_threads;
  if (!o.split_file.empty()) {
    FLOTILLA_RETURN_IF_ERROR(FillSplitPlan(o, moe_layers, &plan));
    return plan;
  }
  placement::Placement p;
  if (!o.placement_file.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(p, placement::Placement::Load(o.placement_file));
    if (p.num_experts() != c.num_experts) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.placement_file, " places ", p.num_experts(),
                       " experts per layer but the model has ", c.num_experts));
    }
    for (int layer : moe_layers) {
      if (p.Holders(layer, 0) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            o.placement_file, " does not place MoE layer ", layer));
      }
    }
    int worker = p.worker();
    if (worker < 0) {
      if (!o.shard_given) {
        return absl::InvalidArgumentError(absl::StrCat(
            o.placement_file,
            " does not say which worker this is; add --shard K/N"));
      }
      worker = o.shard.index;
    }
    if (o.shard_given &&
        (o.shard.index != worker || o.shard.count != p.workers())) {
      return absl::OutOfRangeError(absl::StrCat(
          "shard ", o.shard.index, "/", o.shard.count, " disagrees with ",
          o.placement_file, " (worker ", worker, " of ", p.workers(), ")"));
    }
    plan.shard = ShardSpec{worker, p.workers()};
    plan.placement = o.placement_file;
  } else {
    if (o.shard.count > c.num_experts) {
      // Some worker would own nothing at all: almost surely a typo. OutOfRange
      // (not InvalidArgument) so callers can blame the flag, not the model.
      return absl::OutOfRangeError(
          absl::StrCat("shard count ", o.shard.count, " exceeds the model's ",
                       c.num_experts, " experts per layer"));
    }
    if (o.replicas < 1 || o.replicas > o.shard.count) {
      return absl::OutOfRangeError(absl::StrCat(
          "replicas ", o.replicas, " must be in [1, ", o.shard.count,
          "]: each replica lives on a different worker"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        p, placement::Placement::Rotate(moe_layers, c.num_experts,
                                        o.shard.count, o.replicas));
    plan.shard = o.shard;
    plan.placement = placement::kRotateRule;
  }
  plan.replicas = p.replicas();
  for (int layer : moe_layers) {
    std::vector<uint32_t> owned = p.Owned(plan.shard.index, layer);
    if (!owned.empty()) plan.owned_experts[layer] = std::move(owned);
  }

  // The one fingerprint function (shared/model) that pack and the
  // coordinator use too, so all three agree on what "same checkpoint" is;
  // a fresh pack of this folder has it recorded, without a parse of the
  // checkpoint's headers (~250 MB and seconds at full K3 scale).
  std::string own;
  const std::string pack_dir = o.model_dir + "/flotilla-pack";
  if (fs::exists(pack_dir + "/manifest.json")) {
    absl::StatusOr<pack::PackManifest> m = pack::LoadPackManifest(pack_dir);
    if (m.ok() && m->experts_in_model_dir &&
        pack::CheckPackSource(*m, o.model_dir, pack_dir).ok()) {
      own = m->source_fingerprint;
      plan.pack_dir = pack_dir;
      std::erase_if(m->experts, [&](const pack::PackExpert& e) {
        auto it = plan.owned_experts.find(e.layer);
        return it == plan.owned_experts.end() ||
               !std::binary_search(it->second.begin(), it->second.end(),
                                   static_cast<uint32_t>(e.expert));
      });
      m->experts.shrink_to_fit();
      plan.pack_manifest =
          std::make_shared<const pack::PackManifest>(*std::move(m));
    }
  }
  if (own.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(
        auto ckpt, model::SafetensorsCheckpoint::OpenDir(o.model_dir));
    FLOTILLA_ASSIGN_OR_RETURN(own,
                              model::FingerprintCheckpoint(o.model_dir, *ckpt));
  }
  plan.model_fingerprint = own;
  if (!p.source_fingerprint().empty()) {
    std::error_code ec;
    const bool own_folder =
        fs::equivalent(fs::path(o.placement_file).parent_path().empty()
                           ? fs::path(".")
                           : fs::path(o.placement_file).parent_path(),
                       fs::path(o.model_dir), ec);
    if (own_folder) {
      // A `pack --workers` folder: its files are a re-cut of the source
      // checkpoint, which pack fingerprinted when it wrote them.
      plan.model_fingerprint = p.source_fingerprint();
    } else if (own != p.source_fingerprint()) {
      return absl::FailedPreconditionError(absl::StrCat(
          o.placement_file, " was made for checkpoint fingerprint ",
          p.source_fingerprint(), " but ", o.model_dir, " has fingerprint ",
          own));
    }
  }
  return plan;
}

std::string DescribeShardPlan(const ShardPlan& plan) {
  size_t owned = 0;
  for (const auto& [layer, experts] : plan.owned_experts) {
    owned += experts.size();
  }
  std::string slice;
  if (plan.split) {
    const placement::RowRange i = plan.split->inter_rows();
    const placement::RowRange l = plan.split->latent_rows();
    slice =
        absl::StrCat("split: rows [", i.begin, ", ", i.end, ") of w1/w3 and [",
                     l.begin, ", ", l.end, ") of w2 of every expert\n");
  }
  return absl::StrCat(
      "shard ", plan.shard.index, "/", plan.shard.count, ", replicas ",
      plan.replicas, ", placement ", plan.placement, "\n", slice,  //
      "model ", plan.model_dir, "\n",                              //
      "model fingerprint ", plan.model_fingerprint, "\n",          //
      "layers ", plan.num_layers, " (", plan.owned_experts.size(),
      " with owned experts), experts per layer ", plan.num_experts,
      ", row width ", plan.row_width, "\n",         //
      "owned (layer, expert) pairs ", owned, "\n",  //
      "memory budget ", plan.memory_budget_bytes, " bytes, compute threads ",
      plan.compute_threads, "\n");
}

}  // namespace flotilla::expert_worker
