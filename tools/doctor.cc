#include "tools/doctor.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/memory_budget.h"
#include "shared/kernels/kernels.h"
#include "shared/plan/compute_probe.h"

namespace flotilla::tools {
namespace {

// Without a model: a K3 expert run and a k3-bench one.
constexpr uint64_t kK3ExpertRun = 17547264;
constexpr uint64_t kBenchExpertRun = 1310720;
// Shards at least this large in total are probed in place (read-only)
// instead of a scratch file.
constexpr uint64_t kShardProbeMin = uint64_t{2} << 30;

std::string Gbps(double v) { return absl::StrFormat("%.2f GB/s", v); }

void PrintDisk(const DiskMeasurements& d,
               const std::vector<DiskProbeSpec>& specs, FILE* out) {
  std::vector<int> qds;
  for (const DiskProbeSpec& spec : specs) {
    qds.insert(qds.end(), spec.queue_depths.begin(), spec.queue_depths.end());
  }
  std::sort(qds.begin(), qds.end());
  qds.erase(std::unique(qds.begin(), qds.end()), qds.end());
  const io::DiskProbeResult* first = d.random.empty() ? nullptr : &d.random[0];
  const bool direct = first == nullptr || first->direct;
  const std::string what =
      d.files.size() == 1
          ? d.files[0]
          : absl::StrCat(
                d.files.size(), " files in ",
                std::filesystem::path(d.files[0]).parent_path().string());
  absl::FPrintF(out, "\nDisk (%s, %s, %s%s, %s sampled)\n",
                first != nullptr ? first->reader : "-",
                direct ? "O_DIRECT" : "BUFFERED: page cache inflates these",
                what, d.scratch ? " [scratch, removed]" : " [read-only]",
                io::FormatBytes(first != nullptr ? first->span_bytes : 0));
  absl::FPrintF(out, "  %-20s", "random reads");
  for (int qd : qds) absl::FPrintF(out, " %10s", absl::StrCat("QD", qd));
  absl::FPrintF(out, "\n");
  bool thp_missing = false;
  for (const DiskProbeSpec& spec : specs) {
    const std::string label =
        io::FormatBytesBinary(io::AlignUp(spec.read_size));
    absl::FPrintF(out, "  %-20s",
                  spec.huge_pages ? absl::StrCat(label, ", 2M pages") : label);
    for (int qd : qds) {
      const io::DiskProbeResult* hit = nullptr;
      for (size_t i = 0; i < d.random.size(); ++i) {
        const io::DiskProbeResult& r = d.random[i];
        if (r.read_size == io::AlignUp(spec.read_size) && r.queue_depth == qd &&
            d.random_huge[i] == spec.huge_pages) {
          hit = &r;
        }
      }
      std::string cell = "-";
      if (hit != nullptr) {
        cell = absl::StrFormat("%.2f GB/s", hit->gb_per_s);
        if (spec.huge_pages && hit->huge_page_fraction < 0.5) {
          absl::StrAppend(&cell, "*");
          thp_missing = true;
        }
      }
      absl::FPrintF(out, " %10s", cell);
    }
    absl::FPrintF(out, "\n");
  }
  if (thp_missing) {
    absl::FPrintF(out,
                  "  (*: transparent huge pages refused, read into 4 KiB "
                  "pages)\n");
  }
  absl::FPrintF(out,
                "  (GB/s = 1e9 B/s, steady state over %s files' read-sized "
                "slots, as fio --rw=randread --direct=1 measures; reads land "
                "in 4 KiB pages like the engine's buffers unless marked 2M "
                "pages)\n",
                d.scratch ? "the scratch" : "the");
  if (d.scratch) {
    absl::FPrintF(out,
                  "  note: a freshly written file can be served partly from "
                  "a host or device write cache; --model DIR with its shards "
                  "(2 GiB or more) measures the model's own files\n");
  }
}

void PrintFleet(const ModelSizes& s, int workers, FILE* out) {
  const FleetReads f = PredictFleetReads(s, workers);
  if (f.workers < 1) return;
  const model::ModelShape& c = s.shape;
  absl::FPrintF(
      out,
      "  on %d expert workers (pack --workers %d): each holds %d of every "
      "MoE layer's %d experts and reads per token %.1f experts per layer on "
      "average (%.0f experts, %s), at most %d per layer (%d, %s)\n",
      workers, workers, f.experts_held_per_layer, c.num_experts,
      f.mean_experts_per_token / c.moe_layers, f.mean_experts_per_token,
      io::FormatBytes(f.mean_bytes_per_token),
      f.most_experts_per_token / c.moe_layers, f.most_experts_per_token,
      io::FormatBytes(f.most_bytes_per_token));
}

void PrintModel(const std::string& dir, const ModelSizes& s, FILE* out) {
  const model::ModelShape& c = s.shape;
  const int moe = c.moe_layers;
  uint64_t layers = 0;
  for (uint64_t b : s.layer_region_bytes) layers += b;
  absl::FPrintF(out, "\nModel %s (sizes from %s)\n", dir, s.source);
  absl::FPrintF(out,
                "  family %s, %s experts\n"
                "  %d layers (%d MoE), %d experts of %s, top-%d\n"
                "  trunk %s = layers %s + embedding %s + lm_head %s\n"
                "  experts read per token (uncached): %s\n",
                s.config->family().name, c.expert_format, c.num_layers, moe,
                c.num_experts, io::FormatBytes(s.expert_run_bytes),
                c.experts_per_token, io::FormatBytes(s.trunk_bytes()),
                io::FormatBytes(layers), io::FormatBytes(s.vocab_region_bytes),
                io::FormatBytes(s.vocab_region_bytes),
                io::FormatBytes(static_cast<uint64_t>(moe) *
                                c.experts_per_token * s.expert_run_bytes));
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
                      double large, double expert, double single,
                      uint64_t expert_read, const plan::ComputeRates& rates,
                      int positions, FILE* out) {
  absl::FPrintF(out, "\nCompute (%s)\n  %s\n",
                kernels::SimdLevelName(kernels::ActiveSimdLevel()),
                rates.ToString());
  absl::FPrintF(out,
                "\nPrediction per token (compute at those rates, attention "
                "over %d positions, overlapped with reads: trunk at %s = %s "
                "reads x QD%d, experts at %s = %s reads x QD%d)\n",
                positions, Gbps(large), io::FormatBytesBinary(kTrunkReadBytes),
                kTrunkReadQueueDepth, Gbps(expert),
                io::FormatBytesBinary(io::AlignUp(expert_read)),
                kExpertQueueDepth);
  absl::FPrintF(out, "  %-12s %10s %8s %8s %12s %12s %8s %8s %9s %8s\n",
                "preset", "budget", "pinned", "lm_head", "trunk read",
                "expert read", "compute", "disk", "s/token", "tok/s");
  for (const Prediction& p : preds) {
    const std::string budget = io::FormatBytesBinary(p.budget_bytes);
    if (!p.plan.ok()) {
      absl::FPrintF(out, "  %-12s %10s  does not fit: %s\n", p.preset, budget,
                    p.plan.status().message());
      continue;
    }
    const plan::MemoryPlan& m = *p.plan;
    absl::FPrintF(
        out, "  %-12s %10s %8s %8s %12s %12s %8.3f %8.3f %9.3f %8.3f%s\n",
        p.preset, budget, absl::StrCat(m.pinned_layers, "/", m.num_layers),
        m.lm_head_pinned ? "pinned" : "stream",
        io::FormatBytes(p.large_read_bytes),
        io::FormatBytes(p.expert_read_bytes), p.time.compute_s(),
        p.time.disk_s(), p.seconds_per_token,
        p.seconds_per_token > 0 ? 1 / p.seconds_per_token : 0.0,
        p.budget_bytes > usable ? "  (exceeds free RAM)" : "");
  }
  absl::FPrintF(out,
                "  (reads after a wrong prefetch guess at %s, one at a time; "
                "generate --plan predicts with the same figures given "
                "--disk-gbps %.2f --expert-disk-gbps %.2f --single-read-gbps "
                "%.2f)\n",
                Gbps(single), large, expert, single);
  const Prediction* best = Best(preds, usable);
  if (best == nullptr) {
    absl::FPrintF(out,
                  "\nRecommendation: this machine has too little free memory "
                  "for this model (see the minimum above).\n");
  } else {
    absl::FPrintF(out,
                  "\nRecommendation: --mem %s (%s): %.3g s/token predicted, "
                  "%d of %d trunk layers pinned.\n",
                  best->preset, io::FormatBytesBinary(best->budget_bytes),
                  best->seconds_per_token, best->plan->pinned_layers,
                  best->plan->num_layers);
  }
}

}  // namespace

FleetReads PredictFleetReads(const ModelSizes& s, int workers) {
  const model::ModelShape& c = s.shape;
  FleetReads f;
  if (workers < 1 || c.moe_layers < 1 || c.num_experts < 1) return f;
  f.workers = workers;
  f.experts_held_per_layer = (c.num_experts + workers - 1) / workers;
  f.mean_experts_per_token =
      static_cast<double>(c.experts_per_token) / workers * c.moe_layers;
  f.mean_bytes_per_token =
      static_cast<uint64_t>(f.mean_experts_per_token * s.expert_run_bytes);
  f.most_experts_per_token =
      std::min(c.experts_per_token, f.experts_held_per_layer) * c.moe_layers;
  f.most_bytes_per_token =
      static_cast<uint64_t>(f.most_experts_per_token) * s.expert_run_bytes;
  return f;
}

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
  // Expert-sized reads at QD 1, 8 and 32 (the prediction uses QD32, and
  // QD1 for a lone read after a wrong guess); 64 MiB reads at QD 1, 4 and
  // 32 (the disk's ceiling) when the 2 GiB of buffers that takes fit
  // comfortably (and the files hold 4 GiB, see MeasureDisk); 4 MiB reads at
  // QD2, the engine's trunk pattern and the prediction's trunk figure.
  std::vector<uint64_t> expert_sizes = {kK3ExpertRun, kBenchExpertRun};
  if (sizes) expert_sizes = {sizes->expert_run_bytes};
  std::vector<DiskProbeSpec> specs;
  for (uint64_t size : expert_sizes) {
    specs.push_back({size, {1, 8, kExpertQueueDepth}});
  }
  DiskProbeSpec large{kLargeReadBytes, {1, kTrunkQueueDepth}};
  if (32 * kLargeReadBytes <= avail / 4) large.queue_depths.push_back(32);
  specs.push_back(large);
  specs.push_back({kTrunkReadBytes, {kTrunkReadQueueDepth}});
  // The same reads into 2 MiB pages, at the depths the prediction uses: the
  // engine's read buffers are huge-page backed where THP allows
  // (io::AlignedBuffer), and on a virtio disk that is much faster (fewer,
  // larger requests), so the prediction uses these figures.
  for (uint64_t size : expert_sizes) {
    specs.push_back({size, {1, kExpertQueueDepth}, /*huge_pages=*/true});
  }
  specs.push_back(
      {kTrunkReadBytes, {kTrunkReadQueueDepth}, /*huge_pages=*/true});
  std::string dir = o.path;
  if (dir.empty()) dir = o.model_dir.empty() ? "." : o.model_dir;
  std::vector<std::string> probe_files;
  std::error_code ec;
  if (sizes && sizes->shard_bytes >= kShardProbeMin &&
      std::filesystem::equivalent(dir, o.model_dir, ec)) {
    probe_files = sizes->shards;
  }
  FLOTILLA_ASSIGN_OR_RETURN(DiskMeasurements disk,
                            MeasureDisk(probe_files, dir, o.scratch_bytes,
                                        specs, o.disk_seconds, stderr));

  absl::FPrintF(out, "Flotilla doctor\n\nMemory\n");
  absl::FPrintF(out,
                "  %-14s %s\n  %-14s %s\n  %-14s %s (MemAvailable "
                "less 10%%, within any cgroup limit)\n",
                "MemTotal", io::FormatBytesBinary(total), "MemAvailable",
                io::FormatBytesBinary(avail), "usable budget",
                io::FormatBytesBinary(usable));
  PrintDisk(disk, specs, out);
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
  PrintFleet(*sizes, o.fleet_workers, out);
  const double small_expert =
      disk.RandomGbPerS(sizes->expert_run_bytes, kExpertQueueDepth);
  const double small_large = disk.TrunkGbPerS();
  double expert_gbps = disk.RandomGbPerS(
      sizes->expert_run_bytes, kExpertQueueDepth, /*huge_pages=*/true);
  double large_gbps = disk.TrunkGbPerS(/*huge_pages=*/true);
  if (expert_gbps <= 0 || large_gbps <= 0) {  // not measured: 4 KiB figures
    expert_gbps = small_expert;
    large_gbps = small_large;
  }
  ComputeModel compute;
  compute.positions = o.positions;
  for (const std::string& b : o.budgets) {
    FLOTILLA_ASSIGN_OR_RETURN(uint64_t bytes, io::ResolveBudget(b));
    compute.budgets.push_back({b, bytes});
  }
  const int threads =
      o.threads > 0
          ? o.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  absl::FPrintF(stderr, "doctor: timing the kernels on %d threads\n", threads);
  FLOTILLA_ASSIGN_OR_RETURN(
      compute.rates,
      plan::MeasureComputeRates(sizes->shape, threads, o.compute_seconds));
  if (o.guesses > 0) {
    compute.rows = o.guesses + 1;
    compute.expert_union = plan::ExpertUnion(
        sizes->shape.num_experts, sizes->shape.experts_per_token, compute.rows);
    compute.tokens_per_pass = o.tokens_per_pass;
    FLOTILLA_ASSIGN_OR_RETURN(
        compute.rates.bf16_bytes_per_s,
        plan::MeasureTrunkRateAtRows(sizes->shape, threads, compute.rows,
                                     2 * o.compute_seconds));
    absl::FPrintF(out,
                  "Speculative decoding: %d guesses per pass yielding %.2f "
                  "tokens; each pass reads the union of its %d rows' "
                  "experts (%.2fx one token's) and the trunk once. Below, the "
                  "read columns are one token's, compute and disk a pass's, "
                  "and s/token a pass's time over %.2f.\n",
                  o.guesses, o.tokens_per_pass, compute.rows,
                  compute.expert_union, o.tokens_per_pass);
  }
  const double small_single = disk.RandomGbPerS(sizes->expert_run_bytes, 1);
  compute.single_read_gbps =
      disk.RandomGbPerS(sizes->expert_run_bytes, 1, /*huge_pages=*/true);
  if (compute.single_read_gbps <= 0) compute.single_read_gbps = small_single;
  const std::vector<Prediction> preds = PredictPresets(
      *sizes, usable, o.max_context, large_gbps, expert_gbps, compute);
  PrintPredictions(preds, usable, large_gbps, expert_gbps,
                   compute.single_read_gbps, sizes->expert_run_bytes,
                   compute.rates, o.positions, out);
  ComputeModel small_compute = compute;
  small_compute.single_read_gbps = small_single;
  const std::vector<Prediction> small_preds = PredictPresets(
      *sizes, usable, o.max_context, small_large, small_expert, small_compute);
  const Prediction* small_best = Best(small_preds, usable);
  if (small_best != nullptr && small_large > 0 && small_expert > 0) {
    absl::FPrintF(out,
                  "Where transparent huge pages are off the engine reads into "
                  "4 KiB pages (trunk at %s, experts at %s): --mem %s would "
                  "take %.3g s/token.\n",
                  Gbps(small_large), Gbps(small_expert), small_best->preset,
                  small_best->seconds_per_token);
  }
  return absl::OkStatus();
}

}  // namespace flotilla::tools
