// RemoteExperts' membership: which (layer, expert) pairs the workers hold,
// at connect (CheckFleet, MissingWithout) and since (UpdateMissing, for
// serve's /readyz). Probing workers is in remote_experts_health.cc.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/remote/remote_experts.h"
#include "coordinator/remote/remote_experts_internal.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

// "N (layer, expert) pairs have no <what> (layer L experts a,b; ...)" over
// the routed experts for which lacks(layer, expert) holds, the first 4
// layers named; "" when there are none.
std::string DescribeGaps(const model::MoeSpec& config,
                         const std::function<bool(int, int)>& lacks,
                         const char* what) {
  size_t pairs = 0;
  std::vector<std::string> ranges;
  for (int layer = 0; layer < config.num_layers; ++layer) {
    if (config.IsDenseLayer(layer)) continue;
    std::vector<int> experts;
    for (int e = 0; e < config.num_experts; ++e) {
      if (lacks(layer, e)) experts.push_back(e);
    }
    pairs += experts.size();
    if (!experts.empty() && ranges.size() < 4) {
      ranges.push_back(absl::StrCat("layer ", layer, " experts ",
                                    absl::StrJoin(experts, ",")));
    }
  }
  if (pairs == 0) return "";
  return absl::StrCat(pairs, " (layer, expert) pairs have no ", what, " (",
                      absl::StrJoin(ranges, "; "),
                      ranges.size() < 4 ? "" : "; ...", ")");
}

}  // namespace

uint64_t MaxRequestBytes(const v1::InfoResponse& info) {
  return info.max_request_bytes() > 0 ? info.max_request_bytes()
                                      : uint64_t{4} << 20;
}

absl::Status RemoteExperts::Impl::CheckFleet() {
  max_message_bytes = UINT64_MAX;
  for (const WorkerConn& w : workers) {
    if (!w.has_info) continue;
    FLOTILLA_RETURN_IF_ERROR(CheckInfo(w, w.info));
    max_message_bytes = std::min(max_message_bytes, MaxRequestBytes(w.info));
  }
  FLOTILLA_RETURN_IF_ERROR(CheckSplitFleet());
  holders.assign(config.num_layers, {});
  hinted.assign(config.num_layers, {});
  for (int layer = 0; layer < config.num_layers; ++layer) {
    if (!config.IsDenseLayer(layer)) {
      holders[layer].assign(config.num_experts, {});
      hinted[layer].assign(config.num_experts, -1);
    }
  }
  for (const WorkerConn& w : workers) {
    if (!w.has_info) continue;
    for (const auto& [layer, list] : w.info.owned_experts()) {
      for (uint32_t e : list.experts()) holders[layer][e].push_back(w.index);
    }
  }
  const std::string gaps = DescribeGaps(
      config, [&](int l, int e) { return holders[l][e].empty(); }, "worker");
  if (!gaps.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the expert workers together do not hold every expert: ", gaps,
        "; start the missing shards or fix --workers"));
  }
  return absl::OkStatus();
}

bool RemoteExperts::Impl::AnswersCover(
    const std::vector<absl::StatusOr<v1::InfoResponse>>& infos) const {
  return MissingWithout(infos).empty();
}

std::string RemoteExperts::Impl::MissingWithout(
    const std::vector<absl::StatusOr<v1::InfoResponse>>& infos) const {
  // A split fleet needs every slice: any absent worker leaves a gap.
  std::vector<std::vector<bool>> held(config.num_layers);
  for (int layer = 0; layer < config.num_layers; ++layer) {
    if (!config.IsDenseLayer(layer))
      held[layer].assign(config.num_experts, false);
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!infos[i].ok()) continue;
    if (infos[i]->has_split()) {
      for (const auto& r : infos) {
        if (!r.ok()) return "a split fleet needs every one of its workers";
      }
    }
    for (const auto& [layer, list] : infos[i]->owned_experts()) {
      if (layer >= held.size()) continue;  // CheckInfo names it
      for (uint32_t e : list.experts()) {
        if (e < held[layer].size()) held[layer][e] = true;
      }
    }
  }
  if (infos.size() < workers.size()) return "some workers gave no answer";
  const std::string gaps = DescribeGaps(
      config, [&](int l, int e) { return !held[l][e]; }, "live worker");
  return gaps.empty() ? "" : absl::StrCat("without it ", gaps);
}

std::string RemoteExperts::MissingExperts() const {
  std::lock_guard<std::mutex> lock(impl_->missing_mu);
  return impl_->missing;
}

void RemoteExperts::Impl::UpdateMissing() {
  std::vector<bool> down(workers.size());
  for (size_t w = 0; w < workers.size(); ++w) down[w] = workers[w].down;
  if (down == missing_for_down) return;
  missing_for_down = down;
  std::string text = DescribeGaps(
      config,
      [&](int l, int e) {
        const std::vector<int>& h = holders[l][e];
        return std::none_of(h.begin(), h.end(),
                            [&](int w) { return !down[w]; });
      },
      "live worker");
  std::lock_guard<std::mutex> lock(missing_mu);
  missing = std::move(text);
}

}  // namespace flotilla::coordinator
