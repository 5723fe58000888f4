// RemoteExperts: connecting to the workers, their health, and counters. The
// per-layer calls and the combine are in remote_experts_layer.cc.
#include "coordinator/remote/remote_experts.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/remote/grpc_transport.h"
#include "coordinator/remote/remote_experts_internal.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

// The first, brief round of Info at connect (see ConnectWith).
constexpr int kQuickConnectMs = 1000;

// The owned-experts map as sorted (layer, expert) pairs, for comparing a
// restarted worker's Info with the one it had at connect.
std::set<std::pair<uint32_t, uint32_t>> Ownership(const v1::InfoResponse& i) {
  std::set<std::pair<uint32_t, uint32_t>> out;
  for (const auto& [layer, list] : i.owned_experts()) {
    for (uint32_t e : list.experts()) out.insert({layer, e});
  }
  return out;
}

// The options' own mistakes, before any connection is made.
absl::Status CheckOptions(const RemoteExpertsOptions& options) {
  if (options.workers.empty()) {
    return absl::InvalidArgumentError("no expert workers given");
  }
  if (options.expected_fingerprint.empty()) {
    return absl::InvalidArgumentError(
        "RemoteExperts needs the model's fingerprint to check workers");
  }
  if (options.rpc_deadline_ms < 1 || options.connect_timeout_ms < 1) {
    return absl::InvalidArgumentError("deadlines must be >= 1 ms");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < options.workers.size(); ++i) {
    const std::string& address = options.workers[i];
    if (address.empty() || address.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert worker address '", address, "' is not host:port"));
    }
    if (!seen.insert(address).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert worker ", address, " is listed twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string WorkerConn::Name() const {
  return absl::StrCat("worker ", index, " (", address, ")");
}

absl::Status RemoteExperts::Impl::CheckInfo(
    const WorkerConn& worker, const v1::InfoResponse& info) const {
  if (info.model_fingerprint() != options.expected_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "expert ", worker.Name(), " serves checkpoint fingerprint ",
        info.model_fingerprint().empty() ? "(none)" : info.model_fingerprint(),
        ", but this coordinator's model has fingerprint ",
        options.expected_fingerprint,
        "; refusing it (start the worker on the same checkpoint, or its "
        "`flotilla-tool pack --workers` folder)"));
  }
  if (info.num_layers() != static_cast<uint32_t>(config.num_layers) ||
      info.num_experts() != static_cast<uint32_t>(config.num_experts) ||
      info.row_width() != static_cast<uint32_t>(config.hidden_size)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "expert ", worker.Name(), " serves a model of ", info.num_layers(),
        " layers, ", info.num_experts(), " experts, latent width ",
        info.row_width(), "; this coordinator's has ", config.num_layers, ", ",
        config.num_experts, ", ", config.hidden_size));
  }
  for (const auto& [layer, list] : info.owned_experts()) {
    if (layer >= info.num_layers() ||
        config.IsDenseLayer(static_cast<int>(layer))) {
      return absl::FailedPreconditionError(
          absl::StrCat("expert ", worker.Name(), " claims experts of layer ",
                       layer, ", which has no routed experts"));
    }
    for (uint32_t e : list.experts()) {
      if (e >= info.num_experts()) {
        return absl::FailedPreconditionError(
            absl::StrCat("expert ", worker.Name(), " claims layer ", layer,
                         " expert ", e, " of ", info.num_experts()));
      }
    }
  }
  return absl::OkStatus();
}

void RemoteExperts::Impl::MarkDown(int w, const std::string& error) {
  WorkerConn& worker = workers[w];
  const RemoteClock::time_point now = RemoteClock::now();
  if (!worker.down) {
    ++stats.workers[w].failovers;
    worker.down_since = now;
    std::fprintf(stderr, "flotilla-coordinator: expert %s is down: %s\n",
                 worker.Name().c_str(), error.c_str());
  }
  worker.down = true;
  worker.retry_at = now + std::chrono::milliseconds(options.retry_backoff_ms);
  worker.last_error = error;
}

absl::StatusOr<v1::InfoResponse> RemoteExperts::Impl::ProbeInfo(int w) {
  const RemoteClock::time_point probe = RemoteClock::now();
  absl::StatusOr<v1::InfoResponse> info =
      transport->Info(w, options.rpc_deadline_ms);
  stats.workers[w].info.Add(base::SecondsSince(probe));
  if (!info.ok()) {
    ++stats.workers[w].info_failed;
    return base::WithContext(info.status(), "Info");
  }
  FLOTILLA_RETURN_IF_ERROR(CheckInfo(workers[w], *info));
  return info;
}

bool RemoteExperts::Impl::Usable(int w) {
  WorkerConn& worker = workers[w];
  if (!worker.down) return true;
  if (RemoteClock::now() < worker.retry_at) return false;
  // Fail-fast probe: a dead worker answers at once (connection refused), a
  // hung one within the deadline; either way the backoff starts again.
  const absl::StatusOr<v1::InfoResponse> info = ProbeInfo(w);
  absl::Status ok = info.status();
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
  std::fprintf(stderr, "flotilla-coordinator: expert %s is back after %.1f s\n",
               worker.Name().c_str(), base::SecondsSince(worker.down_since));
  worker.down = false;
  worker.last_error.clear();
  return true;
}

absl::StatusOr<std::unique_ptr<RemoteExperts>> RemoteExperts::Connect(
    const model::MoeSpec& config, const RemoteExpertsOptions& options) {
  FLOTILLA_RETURN_IF_ERROR(CheckOptions(options));
  FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<WorkerTransport> transport,
                            MakeGrpcTransport(options.workers, options.tls));
  return ConnectWith(config, options, std::move(transport));
}

absl::StatusOr<std::unique_ptr<RemoteExperts>> RemoteExperts::ConnectWith(
    const model::MoeSpec& config, const RemoteExpertsOptions& options,
    std::unique_ptr<WorkerTransport> transport) {
  FLOTILLA_RETURN_IF_ERROR(CheckOptions(options));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = options;
  impl->transport = std::move(transport);
  for (size_t i = 0; i < options.workers.size(); ++i) {
    WorkerConn w;
    w.index = static_cast<int>(i);
    w.address = options.workers[i];
    impl->workers.push_back(std::move(w));
    impl->stats.workers.emplace_back().address = options.workers[i];
  }
  // Ask every worker at once. First briefly: when the ones that answer
  // hold every expert (a worker is down, the others have its replicas),
  // start without waiting for the rest; they are probed again later
  // (ProbeAbsent). Otherwise give workers still starting
  // connect_timeout_ms to come up.
  const int quick_ms = std::min(options.connect_timeout_ms, kQuickConnectMs);
  std::vector<absl::StatusOr<v1::InfoResponse>> infos =
      impl->transport->InfoAll(quick_ms);
  int waited_ms = quick_ms;
  if (!impl->AnswersCover(infos) && quick_ms < options.connect_timeout_ms) {
    infos = impl->transport->InfoAll(options.connect_timeout_ms);
    waited_ms = options.connect_timeout_ms;
  }
  // Before the answers are moved into the workers below.
  const std::string missing = impl->MissingWithout(infos);
  for (size_t i = 0; i < impl->workers.size(); ++i) {
    WorkerConn& w = impl->workers[i];
    if (i < infos.size() && infos[i].ok()) {
      w.info = *std::move(infos[i]);
      continue;
    }
    const absl::Status why = i < infos.size()
                                 ? infos[i].status()
                                 : absl::InternalError("no Info answer");
    const absl::Status named = base::WithContext(
        why, absl::StrCat("cannot reach expert ", w.Name(), " (Info within ",
                          waited_ms, " ms)"));
    if (!missing.empty()) {
      return absl::Status(named.code(),
                          absl::StrCat(named.message(), "; ", missing));
    }
    std::fprintf(stderr,
                 "flotilla-coordinator: %s; starting without it (the other "
                 "workers hold every expert), probing it again\n",
                 std::string(named.message()).c_str());
    w.has_info = false;
    w.down = true;
    w.down_since = RemoteClock::now();
    w.retry_at =
        w.down_since + std::chrono::milliseconds(options.retry_backoff_ms);
    w.last_error = std::string(why.message());
  }
  FLOTILLA_RETURN_IF_ERROR(impl->CheckFleet());
  impl->UpdateMissing();
  return std::unique_ptr<RemoteExperts>(new RemoteExperts(std::move(impl)));
}

RemoteExperts::RemoteExperts(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RemoteExperts::~RemoteExperts() = default;

absl::Status RemoteExperts::ComputeLayer(int layer, const float* z, int rows,
                                         const std::vector<ExpertTask>& tasks,
                                         float* out) {
  absl::Status s = impl_->ComputeLayer(layer, z, rows, tasks, out);
  impl_->UpdateMissing();
  return s;
}

absl::Status RemoteExperts::PrefetchLayer(int layer,
                                          const std::vector<int>& experts) {
  return impl_->PrefetchLayer(layer, experts);
}

ExpertBackendStats RemoteExperts::backend_stats() const {
  return impl_->backend;
}

RemoteStats RemoteExperts::remote_stats() const { return impl_->Snapshot(); }

std::string RemoteExperts::Describe() const {
  std::string out;
  for (const WorkerConn& w : impl_->workers) {
    size_t owned = 0;
    for (const auto& [layer, list] : w.info.owned_experts()) {
      owned += list.experts_size();
    }
    absl::StrAppend(&out, w.Name(), ": shard ", w.info.shard_index(), "/",
                    w.info.shard_count(), ", replicas ", w.info.replicas(),
                    ", ", owned, " experts, ",
                    w.down ? "down: " + w.last_error : "up", "\n");
  }
  return out;
}

}  // namespace flotilla::coordinator
