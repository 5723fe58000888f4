#include "tools/doctor.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/memory_budget.h"

namespace flotilla::tools {
namespace {

// Without a model: a K3 expert run and a k3-bench one.
constexpr uint64_t kK3ExpertRun = 17547264;
constexpr uint64_t kBenchExpertRun = 1310720;
// A shard at least this large is probed in place instead of a scratch file.
constexpr uint64_t kShardProbeMin = uint64_t{2} << 30;

std::string Gbps(double v) { return absl::StrFormat("%.2f GB/s", v); }

void PrintDisk(const DiskMeasurements& d, const std::vector<uint64_t>& sizes,
               const std::vector<int>& qds, FILE* out) {
  const io::DiskProbeResult& l = d.large;
  absl::FPrintF(out, "\nDisk (%s, %s, %s%s)\n", l.reader,
                l.direct ? "O_DIRECT" : "BUFFERED: page cache inflates these",
                d.file, d.scratch ? " [scratch, removed]" : " [read-only]");
  absl::FPrintF(out, "  %-16s", "random reads");
  for (int qd : qds) absl::FPrintF(out, " %12s", absl::StrCat("QD", qd));
  absl::FPrintF(out, "\n");
  for (uint64_t size : sizes) {
    absl::FPrintF(out, "  %-16s", io::FormatBytes(io::AlignUp(size)));
    for (int qd : qds) {
      const io::DiskProbeResult* hit = nullptr;
      for (const auto& r : d.random) {
        if (r.read_size == io::AlignUp(size) && r.queue_depth == qd) hit = &r;
      }
      absl::FPrintF(out, " %12s", hit ? Gbps(hit->gb_per_s) : "-");
    }
    absl::FPrintF(out, "\n");
  }
  absl::FPrintF(out, "  %-16s %12s\n", "sequential", Gbps(l.gb_per_s));
  absl::FPrintF(out,
                "  (sequential: 64 MiB reads in file order, 4 in flight)\n");
}

void PrintModel(const std::string& dir, const ModelSizes& s, FILE* out) {
  const model::K3Config& c = s.config;
  const int moe = c.num_hidden_layers -
                  std::min(c.num_hidden_layers, c.first_k_dense_replace);
  uint64_t layers = 0;
  for (uint64_t b : s.layer_region_bytes) layers += b;
  absl::FPrintF(out, "\nModel %s (sizes from %s)\n", dir, s.source);
  absl::FPrintF(out,
                "  %d layers (%d MoE), %d experts of %s, top-%d\n"
                "  trunk %s = layers %s + embedding %s + lm_head %s\n"
                "  experts read per token (uncached): %s\n",
                c.num_hidden_layers, moe, c.num_experts,
                io::FormatBytes(s.expert_run_bytes), c.num_experts_per_token,
                io::FormatBytes(s.trunk_bytes()), io::FormatBytes(layers),
                io::FormatBytes(s.vocab_region_bytes),
                io::FormatBytes(s.vocab_region_bytes),
                io::FormatBytes(static_cast<uint64_t>(moe) *
                                c.num_experts_per_token * s.expert_run_bytes));
}

// The prediction to recommend: the fastest plan that fits the usable
// memory; a named preset over "auto" when they tie.
const Prediction* Best(const std::vector<Prediction>& preds, uint64_t usable) {
  const Prediction* best = nullptr;
  for (const Prediction& p : preds) {
    if (!p.plan.ok() || p.budget_bytes > usable) continue;
    if (best == nullptr ||
        p.seconds_per_token < best->seconds_per_token * 0.999) {
      best = &p;
    }
  }
  return best;
}

void PrintPredictions(const std::vector<Prediction>& preds, uint64_t usable,
                      double large, double expert, int qd, FILE* out) {
  absl::FPrintF(out,
                "\nPrediction per token (I/O lower bound: trunk at %s, "
                "experts at %s = QD%d)\n",
                Gbps(large), Gbps(expert), qd);
  absl::FPrintF(out, "  %-12s %10s %8s %8s %12s %12s %9s %8s\n", "preset",
                "budget", "pinned", "lm_head", "trunk read", "expert read",
                "s/token", "tok/s");
  for (const Prediction& p : preds) {
    const std::string budget = io::FormatBytesBinary(p.budget_bytes);
    if (!p.plan.ok()) {
      absl::FPrintF(out, "  %-12s %10s  does not fit: %s\n", p.preset, budget,
                    p.plan.status().message());
      continue;
    }
    const coordinator::MemoryPlan& m = *p.plan;
    absl::FPrintF(out, "  %-12s %10s %8s %8s %12s %12s %9.2f %8.3f%s\n",
                  p.preset, budget,
                  absl::StrCat(m.pinned_layers, "/", m.num_layers),
                  m.lm_head_pinned ? "pinned" : "stream",
                  io::FormatBytes(p.large_read_bytes),
                  io::FormatBytes(p.expert_read_bytes), p.seconds_per_token,
                  p.seconds_per_token > 0 ? 1 / p.seconds_per_token : 0.0,
                  p.budget_bytes > usable ? "  (exceeds free RAM)" : "");
  }
  const Prediction* best = Best(preds, usable);
  if (best == nullptr) {
    absl::FPrintF(out,
                  "\nRecommendation: this machine has too little free memory "
                  "for this model (see the minimum above).\n");
  } else {
    absl::FPrintF(out,
                  "\nRecommendation: --mem %s (%s): %.2f s/token predicted, "
                  "%d of %d trunk layers pinned.\n",
                  best->preset, io::FormatBytesBinary(best->budget_bytes),
                  best->seconds_per_token, best->plan->pinned_layers,
                  best->plan->num_layers);
  }
}

}  // namespace

absl::Status RunDoctorChecks(const DoctorOptions& o, FILE* out) {
  if (o.disk_seconds <= 0 || o.disk_seconds > 600) {
    return absl::InvalidArgumentError("--disk-seconds must be in (0, 600]");
  }
  FLOTILLA_ASSIGN_OR_RETURN(uint64_t total, io::ReadMeminfoBytes("MemTotal"));
  FLOTILLA_ASSIGN_OR_RETURN(uint64_t avail,
                            io::ReadMeminfoBytes("MemAvailable"));
  FLOTILLA_ASSIGN_OR_RETURN(uint64_t usable, io::ResolveBudget("auto"));

  std::optional<ModelSizes> sizes;
  if (!o.model_dir.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(sizes, LoadModelSizes(o.model_dir));
  }
  std::vector<uint64_t> read_sizes = {kK3ExpertRun, kBenchExpertRun};
  std::vector<int> qds = {1, 8, 32};
  int expert_qd = 16;  // one K3 layer's reads
  if (sizes) {
    read_sizes = {sizes->expert_run_bytes};
    expert_qd = std::clamp(sizes->config.num_experts_per_token, 1, 64);
    if (std::find(qds.begin(), qds.end(), expert_qd) == qds.end()) {
      qds.push_back(expert_qd);
      std::sort(qds.begin(), qds.end());
    }
  }
  std::string dir = o.path;
  if (dir.empty()) dir = o.model_dir.empty() ? "." : o.model_dir;
  std::string probe_file;
  std::error_code ec;
  if (sizes && sizes->largest_shard_bytes >= kShardProbeMin &&
      std::filesystem::equivalent(dir, o.model_dir, ec)) {
    probe_file = sizes->largest_shard;
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      DiskMeasurements disk,
      MeasureDisk(probe_file, dir, o.scratch_bytes, read_sizes, qds,
                  o.disk_seconds, stderr));

  absl::FPrintF(out, "Flotilla doctor\n\nMemory\n");
  absl::FPrintF(out,
                "  %-14s %s\n  %-14s %s\n  %-14s %s (MemAvailable "
                "less 10%%, within any cgroup limit)\n",
                "MemTotal", io::FormatBytesBinary(total), "MemAvailable",
                io::FormatBytesBinary(avail), "usable budget",
                io::FormatBytesBinary(usable));
  PrintDisk(disk, read_sizes, qds, out);
  if (!sizes) {
    const char* preset = "auto";
    for (const char* p : {"laptop", "desktop", "workstation", "server"}) {
      absl::StatusOr<uint64_t> b = io::ResolveBudget(p);
      if (b.ok() && *b <= usable) preset = p;
    }
    absl::FPrintF(out,
                  "\nRecommendation: --mem %s. Pass --model DIR for a "
                  "per-model plan and s/token prediction.\n",
                  preset);
    return absl::OkStatus();
  }
  PrintModel(o.model_dir, *sizes, out);
  const double expert_gbps =
      disk.RandomGbPerS(sizes->expert_run_bytes, expert_qd);
  const std::vector<Prediction> preds = PredictPresets(
      *sizes, usable, o.max_context, disk.large.gb_per_s, expert_gbps);
  PrintPredictions(preds, usable, disk.large.gb_per_s, expert_gbps, expert_qd,
                   out);
  return absl::OkStatus();
}

}  // namespace flotilla::tools
