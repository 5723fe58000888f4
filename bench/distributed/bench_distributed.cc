// flotilla-bench-distributed: runs greedy generation on a model whose trunk
// is in this process and whose routed experts are on expert workers, and
// prints one JSON line of per-decode-token figures for the expert phase:
//   expert_s_per_token       wall time inside RemoteExperts::ComputeLayer
//   worker_s_per_token       of which the slowest worker's own wall time
//   rpc_overhead_ms_per_layer  (expert - worker) / MoE layers: requests,
//                            (de)serialization, transport, scheduling, combine
//   wire_bytes_per_token     serialized request + response payloads
//   calls_per_layer          Compute RPCs per MoE layer
//   coordinator_cpu_s_per_token  CPU time of this process
//   expert_bytes_read_per_token, decode_s_per_token, ids
// Used by bench/distributed/run.sh; see bench/distributed/README.md.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "coordinator/generate.h"
#include "coordinator/families/kimi_k3/model.h"
#include "coordinator/families/kimi_k3/trunk.h"
#include "coordinator/remote/remote_experts.h"
#include "nlohmann/json.hpp"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"

namespace {

namespace co = flotilla::coordinator;

// CPU seconds this process has used (every thread).
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "flotilla-bench-distributed: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, workers;
  int tokens = 8, prompt_tokens = 4, threads = 1;
  bool row_sums = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("model")) {
      model_dir = v;
    } else if (const char* v = value("workers")) {
      workers = v;
    } else if (const char* v = value("tokens")) {
      if (!absl::SimpleAtoi(v, &tokens)) return Fail("bad --tokens");
    } else if (const char* v = value("prompt-tokens")) {
      if (!absl::SimpleAtoi(v, &prompt_tokens))
        return Fail("bad --prompt-tokens");
    } else if (const char* v = value("threads")) {
      if (!absl::SimpleAtoi(v, &threads)) return Fail("bad --threads");
    } else if (arg == "--row-sums") {
      row_sums = true;
    } else {
      return Fail(
          "usage: --model=DIR --workers=H:P,... [--tokens=N] "
          "[--prompt-tokens=N] [--threads=N] [--row-sums]");
    }
  }
  if (model_dir.empty() || workers.empty() || tokens < 2 || prompt_tokens < 1 ||
      threads < 1) {
    return Fail("--model and --workers are required; --tokens >= 2");
  }
  auto config = flotilla::model::LoadK3Config(model_dir + "/config.json");
  if (!config.ok()) return Fail(config.status().ToString());
  auto source = flotilla::model::SafetensorsCheckpoint::OpenDir(model_dir);
  if (!source.ok()) return Fail(source.status().ToString());
  co::RemoteExpertsOptions ro;
  for (absl::string_view w : absl::StrSplit(workers, ',', absl::SkipEmpty())) {
    ro.workers.emplace_back(w.data(), w.size());
  }
  ro.row_sums = row_sums;
  ro.rpc_deadline_ms = 60000;
  auto fp = flotilla::model::FingerprintCheckpoint(model_dir, **source);
  if (!fp.ok()) return Fail(fp.status().ToString());
  ro.expected_fingerprint = *fp;
  auto remote = co::RemoteExperts::Connect((*config).Moe(), ro);
  if (!remote.ok()) return Fail(remote.status().ToString());
  co::RemoteExperts* experts = remote->get();
  auto trunk = co::InMemoryTrunk::Build(**source, *config);
  if (!trunk.ok()) return Fail(trunk.status().ToString());
  std::shared_ptr<flotilla::model::TensorSource> keep(std::move(*source));
  auto model = co::K3Model::FromParts(
      *config, std::make_unique<flotilla::kernels::ThreadPool>(threads),
      std::move(*trunk), std::move(*remote), keep);

  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_tokens; ++i) prompt.push_back(3 + 7 * i);
  co::GenerateOptions go;
  go.max_tokens = tokens;
  // Snapshot after the prefill, so the figures are decode-only.
  co::RemoteStats at_decode;
  co::ExpertBackendStats backend_at_decode;
  bool first = true;
  double cpu_at_decode = 0;
  auto on_token = [&](int32_t) {
    if (first) {
      first = false;
      cpu_at_decode = ProcessCpuSeconds();
      at_decode = experts->remote_stats();
      backend_at_decode = experts->backend_stats();
    }
    return true;
  };
  auto result = co::Generate(*model, prompt, go, on_token);
  if (!result.ok()) return Fail(result.status().ToString());
  const double decode_cpu = ProcessCpuSeconds() - cpu_at_decode;
  const co::RemoteStats& s = experts->remote_stats();
  const co::ExpertBackendStats b = experts->backend_stats();
  const double steps = static_cast<double>(result->generated_ids.size() - 1);
  const double layers = static_cast<double>(s.layers - at_decode.layers);
  const double expert_s = s.layer_seconds - at_decode.layer_seconds;
  const double worker_s = s.worker_seconds - at_decode.worker_seconds;
  std::vector<float> overheads(s.layer_overhead_seconds.begin() +
                                   at_decode.layer_overhead_seconds.size(),
                               s.layer_overhead_seconds.end());
  std::sort(overheads.begin(), overheads.end());
  auto pct = [&](double p) {
    return overheads.empty()
               ? 0.0
               : 1e3 *
                     overheads[static_cast<size_t>(p * (overheads.size() - 1))];
  };
  nlohmann::json out = {
      {"workers", ro.workers.size()},
      {"output", row_sums ? "row_sums" : "expert_outputs"},
      {"decode_tokens", steps},
      {"moe_layers_per_token", layers / steps},
      {"decode_s_per_token", result->decode_seconds / steps},
      {"coordinator_cpu_s_per_token", decode_cpu / steps},
      {"expert_s_per_token", expert_s / steps},
      {"worker_s_per_token", worker_s / steps},
      {"rpc_overhead_ms_per_layer", 1e3 * (expert_s - worker_s) / layers},
      {"rpc_overhead_ms_p50", pct(0.5)},
      {"rpc_overhead_ms_p90", pct(0.9)},
      {"rpc_ms_per_layer",
       1e3 * (s.rpc_seconds - at_decode.rpc_seconds) / layers},
      {"worker_ms_per_layer", 1e3 * worker_s / layers},
      {"calls_per_layer",
       static_cast<double>(s.calls - at_decode.calls) / layers},
      {"wire_bytes_per_token",
       static_cast<double>(s.request_bytes - at_decode.request_bytes +
                           s.response_bytes - at_decode.response_bytes) /
           steps},
      {"request_bytes_per_token",
       static_cast<double>(s.request_bytes - at_decode.request_bytes) / steps},
      {"expert_bytes_read_per_token",
       static_cast<double>(b.bytes_read - backend_at_decode.bytes_read) /
           steps},
      {"failed_calls", s.failed_calls},
      {"even_disks_speedup",
       static_cast<double>(s.worker_bytes_read - at_decode.worker_bytes_read) /
           std::max<double>(
               1, s.busiest_worker_bytes - at_decode.busiest_worker_bytes)},
      {"ids", result->generated_ids},
  };
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
