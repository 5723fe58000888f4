// RemoteExperts' view of worker health: probing workers that are absent
// (never answered), down (failed a call) or, while no layer runs, up; and
// what each answer changes (Admit). Probes of the forward pass run on its
// thread; serve's idle probes run on the health thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/remote/remote_experts.h"
#include "coordinator/remote/remote_experts_internal.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

// The owned-experts map as sorted (layer, expert) pairs, for comparing a
// restarted worker's Info with the one it had at connect.
std::set<std::pair<uint32_t, uint32_t>> Ownership(const v1::InfoResponse& i) {
  std::set<std::pair<uint32_t, uint32_t>> out;
  for (const auto& [layer, list] : i.owned_experts()) {
    for (uint32_t e : list.experts()) out.insert({layer, e});
  }
  return out;
}

// A health thread's probe waits at most this long: a hung worker must not
// hold up the probes of the others for a whole RPC deadline.
constexpr int kHealthProbeMs = 1000;

}  // namespace

absl::StatusOr<v1::InfoResponse> RemoteExperts::Impl::CheckedInfo(
    int w, absl::StatusOr<v1::InfoResponse> answer, double seconds) {
  stats.workers[w].info.Add(seconds);
  if (!answer.ok()) {
    ++stats.workers[w].info_failed;
    return base::WithContext(answer.status(), "Info");
  }
  FLOTILLA_RETURN_IF_ERROR(CheckInfo(workers[w], *answer));
  return answer;
}

absl::StatusOr<v1::InfoResponse> RemoteExperts::Impl::ProbeInfo(
    int w, int deadline_ms) {
  const RemoteClock::time_point probe = RemoteClock::now();
  absl::StatusOr<v1::InfoResponse> answer = transport->Info(w, deadline_ms);
  return CheckedInfo(w, std::move(answer), base::SecondsSince(probe));
}

bool RemoteExperts::Impl::Admit(int w,
                                const absl::StatusOr<v1::InfoResponse>& info) {
  WorkerConn& worker = workers[w];
  absl::Status ok = info.status();
  if (!worker.has_info) {
    if (ok.ok() && info->has_split()) {
      ok = absl::FailedPreconditionError(
          "answers as a split worker, but the fleet is not split");
    }
    if (!ok.ok()) {
      worker.retry_at =
          clock->Now() + std::chrono::milliseconds(options.retry_backoff_ms);
      worker.last_error = std::string(ok.message());
      return false;
    }
    worker.info = *info;
    worker.has_info = true;
    worker.down = false;
    worker.last_error.clear();
    max_message_bytes = std::min(max_message_bytes, MaxRequestBytes(*info));
    for (const auto& [layer, list] : info->owned_experts()) {
      for (uint32_t e : list.experts()) {
        std::vector<int>& h = holders[layer][e];
        h.insert(std::upper_bound(h.begin(), h.end(), w), w);
      }
    }
    std::fprintf(
        stderr, "flotilla-coordinator: expert %s joined after %.1f s\n",
        worker.Name().c_str(), base::Seconds(clock->Now() - worker.down_since));
    return true;
  }
  if (ok.ok() && (Ownership(*info) != Ownership(worker.info) ||
                  info->has_split() != worker.info.has_split() ||
                  info->split().SerializeAsString() !=
                      worker.info.split().SerializeAsString())) {
    ok = absl::FailedPreconditionError(
        "came back owning different experts or slices (restarted with "
        "another placement)");
  }
  if (!ok.ok()) {
    MarkDown(w, std::string(ok.message()));
    return false;
  }
  if (worker.down) {
    std::fprintf(
        stderr, "flotilla-coordinator: expert %s is back after %.1f s\n",
        worker.Name().c_str(), base::Seconds(clock->Now() - worker.down_since));
    worker.down = false;
    worker.last_error.clear();
  }
  return true;
}

void RemoteExperts::Impl::ProbeAbsent() {
  for (WorkerConn& w : workers) {
    if (w.has_info || clock->Now() < w.retry_at) continue;
    Admit(w.index, ProbeInfo(w.index, options.rpc_deadline_ms));
  }
}

bool RemoteExperts::Impl::Usable(int w) {
  WorkerConn& worker = workers[w];
  if (!worker.down) return true;
  if (clock->Now() < worker.retry_at) return false;
  // Fail-fast probe: a dead worker answers at once (connection refused), a
  // hung one within the deadline; either way the backoff starts again.
  return Admit(w, ProbeInfo(w, options.rpc_deadline_ms));
}

void RemoteExperts::Impl::CheckWorkers() {
  std::vector<int> targets;
  {
    std::lock_guard<std::mutex> lock(calls_mu);
    const RemoteClock::time_point now = clock->Now();
    const bool idle = now - last_layer_at >=
                      std::chrono::milliseconds(options.health_interval_ms);
    for (const WorkerConn& w : workers) {
      const bool absent_or_down = !w.has_info || w.down;
      if (absent_or_down ? now >= w.retry_at : idle) targets.push_back(w.index);
    }
  }
  // Ask without the lock, so the forward pass is not held up by a slow
  // worker; the answers are applied under it.
  std::vector<std::pair<absl::StatusOr<v1::InfoResponse>, double>> answers;
  for (int w : targets) {
    const RemoteClock::time_point probe = RemoteClock::now();
    absl::StatusOr<v1::InfoResponse> answer =
        transport->Info(w, std::min(kHealthProbeMs, options.rpc_deadline_ms));
    answers.emplace_back(std::move(answer), base::SecondsSince(probe));
  }
  std::lock_guard<std::mutex> lock(calls_mu);
  for (size_t i = 0; i < targets.size(); ++i) {
    const int w = targets[i];
    Admit(w, CheckedInfo(w, std::move(answers[i].first), answers[i].second));
  }
  UpdateMissing();
}

void RemoteExperts::Impl::StartHealthThread() {
  if (options.health_interval_ms <= 0) return;
  health_thread = std::thread([this] {
    std::unique_lock<std::mutex> lock(health_mu);
    while (!health_cv.wait_for(
        lock, std::chrono::milliseconds(options.health_interval_ms),
        [this] { return health_stop; })) {
      lock.unlock();
      CheckWorkers();
      lock.lock();
    }
  });
}

void RemoteExperts::Impl::StopHealthThread() {
  if (!health_thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(health_mu);
    health_stop = true;
  }
  health_cv.notify_all();
  health_thread.join();
}

void RemoteExperts::CheckWorkers() { impl_->CheckWorkers(); }

}  // namespace flotilla::coordinator
