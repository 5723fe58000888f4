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
#include "shared/io/checksum.h"
#include "shared/transport/address.h"

namespace flotilla::coordinator {
namespace {

// The first, brief round of Info at connect (see ConnectWith).
constexpr int kQuickConnectMs = 1000;

// The options' own mistakes, before any connection is made.
absl::Status CheckOptions(const RemoteExpertsOptions& options) {
  if (options.workers.empty()) {
    return absl::InvalidArgumentError("no expert workers given");
  }
  if (options.expected_fingerprint.empty()) {
    return absl::InvalidArgumentError(
        "RemoteExperts needs the model's fingerprint to check workers");
  }
  if (options.rpc_deadline_ms < 1 || options.connect_timeout_ms < 0) {
    return absl::InvalidArgumentError(
        "the call deadline must be >= 1 ms and the connect timeout >= 0");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < options.workers.size(); ++i) {
    const std::string& address = options.workers[i];
    FLOTILLA_RETURN_IF_ERROR(
        base::WithContext(transport::CheckHostPort(address), "expert worker"));
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
    FLOTILLA_RETURN_IF_ERROR(CheckChecksums(worker, layer, list));
  }
  return absl::OkStatus();
}

absl::Status RemoteExperts::Impl::CheckChecksums(
    const WorkerConn& worker, uint32_t layer,
    const v1::ExpertList& list) const {
  const std::vector<uint64_t>& want = options.expected_checksums;
  if (want.empty() || list.checksums_size() == 0) return absl::OkStatus();
  if (list.checksums_size() != list.experts_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("expert ", worker.Name(), " lists ", list.checksums_size(),
                     " checksums for the ", list.experts_size(),
                     " experts of layer ", layer));
  }
  for (int i = 0; i < list.experts_size(); ++i) {
    const uint32_t e = list.experts(i);
    const uint64_t expected =
        want[static_cast<size_t>(layer) * config.num_experts + e];
    if (list.checksums(i) != expected) {
      return absl::FailedPreconditionError(absl::StrCat(
          "expert ", worker.Name(), " serves layer ", layer, " expert ", e,
          " with content checksum ", io::ChecksumHex(list.checksums(i)),
          ", but this coordinator's pack of checkpoint ",
          options.expected_fingerprint, " has ", io::ChecksumHex(expected),
          ": the worker holds other weights under the same layout; refusing "
          "it (start it on the same checkpoint)"));
    }
  }
  return absl::OkStatus();
}

void RemoteExperts::Impl::MarkDown(int w, const std::string& error) {
  WorkerConn& worker = workers[w];
  const RemoteClock::time_point now = clock->Now();
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
  impl->clock = options.clock != nullptr ? options.clock : base::Clock::Real();
  impl->transport = std::move(transport);
  for (size_t i = 0; i < options.workers.size(); ++i) {
    WorkerConn w;
    w.index = static_cast<int>(i);
    w.address = options.workers[i];
    impl->workers.push_back(std::move(w));
    impl->stats.workers.emplace_back().address = options.workers[i];
  }
  // Ask every worker at once, fail-fast: a refused port or an unknown host
  // answers at once. When the ones that answer hold every expert (a worker
  // is down, the others have its replicas), start without the rest; they
  // are probed again later (ProbeAbsent). Otherwise, and only when asked
  // to (connect_timeout_ms), wait for workers still starting.
  std::vector<absl::StatusOr<v1::InfoResponse>> infos =
      impl->transport->InfoAll(kQuickConnectMs, /*wait_for_ready=*/false);
  int waited_ms = kQuickConnectMs;
  if (!impl->AnswersCover(infos) && options.connect_timeout_ms > 0) {
    infos = impl->transport->InfoAll(options.connect_timeout_ms,
                                     /*wait_for_ready=*/true);
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
      return absl::Status(
          named.code(),
          absl::StrCat(named.message(), "; ", missing,
                       options.connect_timeout_ms > 0
                           ? ""
                           : " (--connect-timeout-ms MS waits for workers "
                             "that are still starting)"));
    }
    std::fprintf(stderr,
                 "flotilla-coordinator: %s; starting without it (the other "
                 "workers hold every expert), probing it again\n",
                 std::string(named.message()).c_str());
    w.has_info = false;
    w.down = true;
    w.down_since = impl->clock->Now();
    w.retry_at =
        w.down_since + std::chrono::milliseconds(options.retry_backoff_ms);
    w.last_error = std::string(why.message());
  }
  FLOTILLA_RETURN_IF_ERROR(impl->CheckFleet());
  impl->UpdateMissing();
  impl->last_layer_at = impl->clock->Now();
  impl->StartHealthThread();
  return std::unique_ptr<RemoteExperts>(new RemoteExperts(std::move(impl)));
}

RemoteExperts::RemoteExperts(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RemoteExperts::~RemoteExperts() { impl_->StopHealthThread(); }

absl::Status RemoteExperts::ComputeLayer(int layer, const float* z, int rows,
                                         const std::vector<ExpertTask>& tasks,
                                         float* out) {
  std::lock_guard<std::mutex> lock(impl_->calls_mu);
  absl::Status s = impl_->ComputeLayer(layer, z, rows, tasks, out);
  impl_->last_layer_at = impl_->clock->Now();
  impl_->UpdateMissing();
  return s;
}

absl::Status RemoteExperts::PrefetchLayer(int layer,
                                          const std::vector<int>& experts) {
  std::lock_guard<std::mutex> lock(impl_->calls_mu);
  return impl_->PrefetchLayer(layer, experts);
}

ExpertBackendStats RemoteExperts::backend_stats() const {
  return impl_->backend;
}

RemoteStats RemoteExperts::remote_stats() const {
  std::lock_guard<std::mutex> lock(impl_->calls_mu);
  return impl_->Snapshot();
}

std::string RemoteExperts::Describe() const {
  std::lock_guard<std::mutex> lock(impl_->calls_mu);
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
