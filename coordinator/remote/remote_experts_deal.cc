// RemoteExperts: choosing which holder serves each expert of a layer (shared
// by ComputeLayer and the Prefetch hints, so that a hint goes where the
// layer's call will go) and sending the hints (see remote_experts.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/remote/deal.h"
#include "coordinator/remote/remote_experts_internal.h"

namespace flotilla::coordinator {
void RemoteExperts::Impl::DealLayer(int layer, const std::vector<int>& experts,
                                    const std::function<bool(int)>& usable,
                                    bool prefer_hinted,
                                    std::vector<int>* chosen,
                                    std::vector<int>* unserved) const {
  chosen->assign(config.num_experts, -1);
  std::vector<int> dealt;
  std::vector<std::vector<int>> candidates;
  for (int e : experts) {
    const std::vector<int>& h = holders[layer][e];
    std::vector<int> live;
    for (size_t k = 0; k < h.size(); ++k) {
      // Rotated so that ties between holders spread over the fleet.
      const int w = h[(k + e + layer) % h.size()];
      if (usable(w)) live.push_back(w);
    }
    if (live.empty()) {
      unserved->push_back(e);
      continue;
    }
    if (prefer_hinted) {
      // The hinted holder first: the Dealer keeps the busiest worker as
      // light as without hints, and among such deals uses the read the
      // hint started.
      auto it = std::find(live.begin(), live.end(), hinted[layer][e]);
      if (it != live.end()) std::rotate(live.begin(), it, it + 1);
    }
    dealt.push_back(e);
    candidates.push_back(std::move(live));
  }
  const std::vector<int> to =
      DealItems(candidates, static_cast<int>(workers.size()));
  for (size_t i = 0; i < dealt.size(); ++i) {
    if (to[i] < 0) {
      unserved->push_back(dealt[i]);
    } else {
      (*chosen)[dealt[i]] = to[i];
    }
  }
}

absl::Status RemoteExperts::Impl::PrefetchLayer(
    int layer, const std::vector<int>& experts) {
  if (layer < 0 || layer >= config.num_layers || holders[layer].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch: layer ", layer, " has no routed experts"));
  }
  std::vector<bool> wanted(config.num_experts, false);
  for (int e : experts) {
    if (e < 0 || e >= config.num_experts) {
      return absl::InvalidArgumentError(absl::StrCat("prefetch: layer ", layer,
                                                     " expert ", e, " of ",
                                                     config.num_experts));
    }
    wanted[e] = true;
  }
  std::vector<int> need;
  for (int e = 0; e < config.num_experts; ++e) {
    if (wanted[e]) need.push_back(e);
  }
  std::fill(hinted[layer].begin(), hinted[layer].end(), -1);
  if (need.empty()) return absl::OkStatus();
  // Down workers are skipped, never probed: probing blocks, and a hint is
  // not worth waiting for.
  const int num_workers = static_cast<int>(workers.size());
  std::vector<std::vector<uint32_t>> per_worker(num_workers);
  if (is_split) {
    // Every worker holds a slice of every expert: all of them read.
    for (int w = 0; w < num_workers; ++w) {
      if (!workers[w].down) per_worker[w].assign(need.begin(), need.end());
    }
  } else {
    std::vector<int> chosen, unserved;
    DealLayer(
        layer, need, [this](int w) { return !workers[w].down; },
        /*prefer_hinted=*/false, &chosen, &unserved);
    if (!unserved.empty()) ++stats.prefetch_dropped;
    for (int e : need) {
      if (chosen[e] >= 0) per_worker[chosen[e]].push_back(e);
    }
  }
  const uint64_t step_id = step;  // the step whose ComputeLayer comes next
  for (int w = 0; w < num_workers; ++w) {
    if (per_worker[w].empty()) continue;
    if (transport->Prefetches().in_flight >=
        static_cast<size_t>(options.max_prefetch_in_flight)) {
      ++stats.prefetch_dropped;
      continue;
    }
    v1::PrefetchRequest request;
    for (uint32_t e : per_worker[w]) hinted[layer][e] = w;
    request.set_layer(static_cast<uint32_t>(layer));
    request.set_step_id(step_id);
    request.mutable_experts()->Add(per_worker[w].begin(), per_worker[w].end());
    ++stats.prefetch_calls;
    ++stats.workers[w].prefetch_sent;
    stats.prefetch_experts += per_worker[w].size();
    transport->SendPrefetch(w, request, options.prefetch_deadline_ms);
  }
  return absl::OkStatus();
}

RemoteStats RemoteExperts::Impl::Snapshot() {
  const PrefetchTally hints = transport->Prefetches();
  RemoteStats s = stats;
  s.prefetch_failed = hints.failed;
  s.prefetch_scheduled = hints.scheduled;
  for (size_t w = 0; w < workers.size(); ++w)
    s.workers[w].up = !workers[w].down;
  return s;
}

}  // namespace flotilla::coordinator
