#include "coordinator/run_report.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/model/layer_source.h"
#include "shared/io/memory_budget.h"
#include "shared/kernels/kernels.h"

namespace flotilla::coordinator {

RunCounters SnapshotCounters(const Engine& engine) {
  RunCounters c;
  if (engine.trunk != nullptr) c.trunk = engine.trunk->stats();
  if (engine.trunk_layers != nullptr) c.trunk = engine.trunk_layers->stats();
  c.experts = engine.model->experts()->backend_stats();
  c.routed_by_layer = engine.model->experts()->routed_by_layer();
  if (const auto* remote =
          dynamic_cast<const RemoteExperts*>(engine.model->experts())) {
    c.remote = true;
    c.remote_stats = remote->remote_stats();
  }
  return c;
}

nlohmann::json RemoteDecodeStats(const RemoteStats& at_decode,
                                 const RemoteStats& now, double steps) {
  const RemoteStats& a = at_decode;
  const RemoteStats& b = now;
  const uint64_t layers = b.layers - a.layers;
  const size_t first = std::min(a.layer_overhead_seconds.size(),
                                b.layer_overhead_seconds.size());
  std::vector<float> overhead(b.layer_overhead_seconds.begin() + first,
                              b.layer_overhead_seconds.end());
  std::sort(overhead.begin(), overhead.end());
  auto ms_at = [&](double q) {
    if (overhead.empty()) return 0.0;
    return 1e3 * overhead[static_cast<size_t>(q * (overhead.size() - 1))];
  };
  const uint64_t read = b.worker_bytes_read - a.worker_bytes_read;
  const uint64_t busiest = b.busiest_worker_bytes - a.busiest_worker_bytes;
  return {
      {"moe_layers", layers},
      {"calls", b.calls - a.calls},
      {"retried_calls", b.retried_calls - a.retried_calls},
      {"failed_calls", b.failed_calls - a.failed_calls},
      {"calls_per_layer",
       layers > 0 ? static_cast<double>(b.calls - a.calls) / layers : 0.0},
      {"request_bytes_per_token", (b.request_bytes - a.request_bytes) / steps},
      {"response_bytes_per_token",
       (b.response_bytes - a.response_bytes) / steps},
      {"rpc_overhead_ms_per_layer_p50", ms_at(0.5)},
      {"rpc_overhead_ms_per_layer_p90", ms_at(0.9)},
      {"rpc_overhead_ms_per_layer_mean",
       layers > 0 ? 1e3 * (b.overhead_seconds() - a.overhead_seconds()) /
                        static_cast<double>(layers)
                  : 0.0},
      // Per layer the bytes of the worker that read the most, over all
      // bytes read: 1/N when N workers share every layer evenly.
      {"busiest_worker_share",
       read > 0 ? static_cast<double>(busiest) / static_cast<double>(read)
                : 0.0},
      // Split fleets: what down rounds had to read again (0 expected).
      {"split_down_bytes_read",
       b.split_down_bytes_read - a.split_down_bytes_read},
      {"prefetch_hints_sent", b.prefetch_calls - a.prefetch_calls},
      {"prefetch_hints_failed", b.prefetch_failed - a.prefetch_failed},
      {"prefetch_hints_dropped", b.prefetch_dropped - a.prefetch_dropped},
      {"prefetch_experts_hinted", b.prefetch_experts - a.prefetch_experts},
      {"prefetch_experts_scheduled",
       b.prefetch_scheduled - a.prefetch_scheduled},
  };
}

nlohmann::json WorkerRpcJson(const RemoteStats& stats) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerRpcStats& w : stats.workers) {
    const uint64_t calls = w.compute.count();
    const uint64_t probes = w.info.count();
    workers.push_back({
        {"address", w.address},
        {"up", w.up},
        {"compute_calls", calls},
        {"compute_failed", w.compute_failed},
        {"compute_mean_ms",
         calls > 0 ? 1e3 * w.compute.sum_seconds / calls : 0.0},
        {"info_probes", probes},
        {"info_failed", w.info_failed},
        {"failovers", w.failovers},
        {"prefetch_hints_sent", w.prefetch_sent},
    });
  }
  return workers;
}

nlohmann::json DecodeStats(const Engine& engine, const RunCounters& at_decode,
                           const RunCounters& now,
                           const GenerateResult& result) {
  const TrunkStats& t0 = at_decode.trunk;
  const ExpertBackendStats& x0 = at_decode.experts;
  const TrunkStats& t = now.trunk;
  const ExpertBackendStats& x = now.experts;
  const size_t n_gen = result.generated_ids.size();
  const double steps = std::max<double>(1.0, n_gen > 1 ? n_gen - 1 : 0);
  std::vector<double> sorted = result.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double trunk_bytes = (t.bytes_read - t0.bytes_read) / steps;
  const double expert_bytes = (x.bytes_read - x0.bytes_read) / steps;
  const double trunk_wait = (t.wait_seconds - t0.wait_seconds) / steps;
  const double expert_wait = (x.io_wait_seconds - x0.io_wait_seconds) / steps;
  const double io_wait = trunk_wait + expert_wait;
  nlohmann::json out = {
      {"mode", engine.streaming ? "streaming" : "in-memory"},
      {"decode_steps", n_gen > 1 ? n_gen - 1 : 0},
      {"median_s_per_token", median},
      {"step_seconds", result.step_seconds},
      {"trunk_bytes_per_token", trunk_bytes},
      {"expert_bytes_per_token", expert_bytes},
      {"expert_cache_hits_per_token", (x.cache_hits - x0.cache_hits) / steps},
      {"expert_prefetch_hits_per_token",
       (x.prefetch_hits - x0.prefetch_hits) / steps},
      {"read_gb_per_s",
       median > 0 ? (trunk_bytes + expert_bytes) / median / 1e9 : 0.0},
      {"io_wait_s_per_token", io_wait},
      {"trunk_wait_s_per_token", trunk_wait},
      {"expert_io_wait_s_per_token", expert_wait},
      {"trunk_read_busy_s_per_token",
       (t.read_seconds - t0.read_seconds) / steps},
      {"trunk_verify_s_per_token",
       (t.verify_seconds - t0.verify_seconds) / steps},
      {"expert_verify_s_per_token",
       (x.verify_seconds - x0.verify_seconds) / steps},
      {"expert_verify_landed_s_per_token",
       (x.early_verify_seconds - x0.early_verify_seconds) / steps},
      {"compute_s_per_token",
       std::max(0.0, result.decode_seconds / steps - io_wait)},
      {"peak_rss_bytes", io::PeakRssBytes()},
      {"budget_bytes", engine.plan.budget_bytes},
      {"planned_bytes", engine.plan.total_bytes},
      {"rss_after_open_bytes", engine.rss_after_open_bytes},
      {"planned_open_bytes", engine.plan.open_bytes()},
      {"pinned_layers", engine.plan.pinned_layers},
      {"direct_io", (engine.trunk != nullptr && engine.trunk->direct_io()) ||
                        (engine.trunk_layers != nullptr &&
                         engine.trunk_layers->direct_io())},
  };
  if (now.remote) {
    out["remote"] =
        RemoteDecodeStats(at_decode.remote_stats, now.remote_stats, steps);
    out["remote"]["workers"] = WorkerRpcJson(now.remote_stats);
  }
  return out;
}

absl::Status WriteLogits(const std::string& path, const GenerateResult& r) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  }
  // x86-64 is little-endian, so the floats are written as they are.
  out.write(reinterpret_cast<const char*>(r.logits.data()),
            static_cast<std::streamsize>(r.logits.size() * sizeof(float)));
  if (!out) return absl::DataLossError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

nlohmann::json GenerationJson(const RunSummary& run,
                              const GenerateResult& result,
                              nlohmann::json stats) {
  const double decode_steps =
      result.generated_ids.size() > 1 ? result.generated_ids.size() - 1.0 : 0.0;
  nlohmann::json out;
  out["model"] = run.model_dir;
  out["prompt_ids"] = run.prompt;
  out["generated_ids"] = result.generated_ids;
  if (run.text != nullptr) out["text"] = *run.text;
  out["finish_reason"] = result.finish_reason;
  out["threads"] = run.threads;
  out["simd"] = kernels::SimdLevelName(kernels::ActiveSimdLevel());
  out["timings"] = {
      {"load_s", run.load_seconds},
      {"prefill_s", result.prefill_seconds},
      {"decode_s", result.decode_seconds},
      {"prefill_tokens_per_s", result.prefill_seconds > 0
                                   ? run.prompt.size() / result.prefill_seconds
                                   : 0.0},
      {"decode_tokens_per_s", result.decode_seconds > 0 && decode_steps > 0
                                  ? decode_steps / result.decode_seconds
                                  : 0.0}};
  out["memory"] = {{"trunk_bytes", run.trunk_bytes},
                   {"sequence_state_bytes", result.state_bytes}};
  if (result.speculative_passes > 0 || result.replay_passes > 0) {
    // Tokens per forward pass: every decode pass (plain steps too) against
    // the tokens they produced (the first comes from the prefill).
    const double passes = static_cast<double>(result.step_seconds.size());
    out["speculation"] = {
        {"passes_with_guesses", result.speculative_passes},
        {"drafted_tokens", result.drafted_tokens},
        {"accepted_tokens", result.accepted_tokens},
        {"replay_passes", result.replay_passes},
        {"decode_passes", passes},
        {"tokens_per_pass", passes > 0 ? decode_steps / passes : 0.0}};
  }
  out["stats"] = std::move(stats);
  return out;
}

}  // namespace flotilla::coordinator
