#include "shared/placement/placement.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::placement {
namespace {

using nlohmann::json;

constexpr char kFormat[] = "flotilla-placement";
constexpr int kVersion = 1;

absl::Status CheckShape(int num_experts, int workers, int replicas) {
  if (workers < 1 || workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker count ", workers, " is outside [1, ", kMaxWorkers, "]"));
  }
  if (replicas < 1 || replicas > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas ", replicas, " must be in [1, ", workers,
                     "] (replicas live on distinct workers)"));
  }
  if (num_experts < 1 || num_experts > kMaxExperts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert count ", num_experts, " is outside [1, ", kMaxExperts, "]"));
  }
  return absl::OkStatus();
}

// Reads a non-negative integer field; InvalidArgument naming it otherwise.
absl::StatusOr<int> IntField(const json& j, const char* key,
                             absl::string_view source) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<int64_t>() > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": \"", key, "\" must be a non-negative integer"));
  }
  return static_cast<int>(it->get<int64_t>());
}

}  // namespace

absl::StatusOr<Placement> Placement::Rotate(const std::vector<int>& moe_layers,
                                            int num_experts, int workers,
                                            int replicas) {
  FLOTILLA_RETURN_IF_ERROR(CheckShape(num_experts, workers, replicas));
  Placement p;
  p.workers_ = workers;
  p.replicas_ = replicas;
  p.num_experts_ = num_experts;
  p.rule_ = kRotateRule;
  for (int layer : moe_layers) {
    if (layer < 0 || p.holders_.count(layer) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("MoE layer ", layer, " is negative or repeated"));
    }
    std::vector<int32_t>& h = p.holders_[layer];
    h.resize(static_cast<size_t>(num_experts) * replicas);
    for (int e = 0; e < num_experts; ++e) {
      const int primary = (e + layer) % workers;
      h[static_cast<size_t>(e) * replicas] = primary;
      for (int j = 1; j < replicas; ++j) {
        const int offset = 1 + (e / workers + j - 1) % (workers - 1);
        h[static_cast<size_t>(e) * replicas + j] = (primary + offset) % workers;
      }
    }
  }
  return p;
}

absl::StatusOr<Placement> Placement::FromJson(absl::string_view text,
                                              absl::string_view source) {
  FLOTILLA_ASSIGN_OR_RETURN(json j, model::internal::ParseJson(text, source));
  if (!j.is_object() || j.value("format", "") != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a placement file (expected \"format\": \"",
                     kFormat, "\")"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(const int version, IntField(j, "version", source));
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": placement version ", version,
                     " (this build reads ", kVersion, ")"));
  }
  Placement p;
  FLOTILLA_ASSIGN_OR_RETURN(p.workers_, IntField(j, "workers", source));
  FLOTILLA_ASSIGN_OR_RETURN(p.replicas_, IntField(j, "replicas", source));
  FLOTILLA_ASSIGN_OR_RETURN(p.num_experts_, IntField(j, "num_experts", source));
  if (absl::Status s = CheckShape(p.num_experts_, p.workers_, p.replicas_);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  p.rule_ = j.contains("rule") && j["rule"].is_string()
                ? j["rule"].get<std::string>()
                : "explicit";
  if (j.contains("worker")) {
    FLOTILLA_ASSIGN_OR_RETURN(p.worker_, IntField(j, "worker", source));
    if (p.worker_ >= p.workers_) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": \"worker\" ", p.worker_,
                       " is not below \"workers\" ", p.workers_));
    }
  }
  if (j.contains("source_fingerprint")) {
    if (!j["source_fingerprint"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": \"source_fingerprint\" must be a string"));
    }
    p.fingerprint_ = j["source_fingerprint"].get<std::string>();
  }
  const auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_object() || layers->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": \"layers\" must be a non-empty object"));
  }
  for (const auto& [key, experts] : layers->items()) {
    int layer = -1;
    if (!absl::SimpleAtoi(key, &layer) || layer < 0 || layer > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": layer key \"", key, "\" is not a layer"));
    }
    const std::string where = absl::StrCat(source, ": layer ", layer);
    if (!experts.is_array() ||
        experts.size() != static_cast<size_t>(p.num_experts_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " must list ", p.num_experts_, " experts' holders"));
    }
    std::vector<int32_t>& h = p.holders_[layer];
    h.reserve(static_cast<size_t>(p.num_experts_) * p.replicas_);
    for (size_t e = 0; e < experts.size(); ++e) {
      const json& list = experts[e];
      if (!list.is_array() || list.size() != static_cast<size_t>(p.replicas_)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " expert ", e, ": expected ", p.replicas_, " workers"));
      }
      std::set<int64_t> seen;
      for (const json& w : list) {
        if (!w.is_number_integer() || w.get<int64_t>() < 0 ||
            w.get<int64_t>() >= p.workers_ ||
            !seen.insert(w.get<int64_t>()).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, " expert ", e,
              ": holders must be distinct workers in [0, ", p.workers_,
              "), got ", model::internal::DescribeJson(list)));
        }
        h.push_back(static_cast<int32_t>(w.get<int64_t>()));
      }
    }
  }
  return p;
}

absl::StatusOr<Placement> Placement::Load(const std::string& path) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            model::internal::ReadSmallFile(path));
  return FromJson(text, path);
}

std::string Placement::ToJson() const {
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["rule"] = rule_;
  j["workers"] = workers_;
  j["replicas"] = replicas_;
  j["num_experts"] = num_experts_;
  if (worker_ >= 0) j["worker"] = worker_;
  if (!fingerprint_.empty()) j["source_fingerprint"] = fingerprint_;
  json layers = json::object();
  for (const auto& [layer, h] : holders_) {
    json experts = json::array();
    for (int e = 0; e < num_experts_; ++e) {
      experts.push_back(std::vector<int32_t>(
          h.begin() + static_cast<size_t>(e) * replicas_,
          h.begin() + static_cast<size_t>(e + 1) * replicas_));
    }
    layers[std::to_string(layer)] = std::move(experts);
  }
  j["layers"] = std::move(layers);
  return j.dump() + "\n";
}

std::vector<int> Placement::layers() const {
  std::vector<int> out;
  for (const auto& [layer, h] : holders_) out.push_back(layer);
  return out;
}

const int32_t* Placement::Holders(int layer, int expert) const {
  const auto it = holders_.find(layer);
  if (it == holders_.end() || expert < 0 || expert >= num_experts_) {
    return nullptr;
  }
  return it->second.data() + static_cast<size_t>(expert) * replicas_;
}

bool Placement::Holds(int worker, int layer, int expert) const {
  const int32_t* h = Holders(layer, expert);
  return h != nullptr && std::find(h, h + replicas_, worker) != h + replicas_;
}

std::vector<uint32_t> Placement::Owned(int worker, int layer) const {
  std::vector<uint32_t> out;
  for (int e = 0; e < num_experts_; ++e) {
    if (Holds(worker, layer, e)) out.push_back(static_cast<uint32_t>(e));
  }
  return out;
}

size_t Placement::OwnedCount(int worker) const {
  size_t n = 0;
  for (const auto& [layer, h] : holders_) {
    n += static_cast<size_t>(std::count(h.begin(), h.end(), worker));
  }
  return n;
}

}  // namespace flotilla::placement
