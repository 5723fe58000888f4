// flotilla-bench-batch: aggregate decode throughput of continuous batching.
// Opens one engine the way `generate` does (--model, --mem, --threads,
// --workers), then for each batch size N in --batches: starts N sequences
// on different random prompts, prefills them in one step, and decodes
// --steps greedy tokens for all N together through ForwardBatch (the step
// the serving loop runs). Prints, per N, the median step time, aggregate
// tokens/s, and the bytes read per step by source (trunk regions and vocab
// chunks; routed experts) with the distinct experts computed per MoE layer.
// The memory plan is the one `serve --max-batch <largest N>` would make:
// every sequence's state charged for --max-context positions.
// The I/O bound of N sequences over one is N * bytes(1) / bytes(N): the
// speed-up a disk-bound run could reach at most.
//
// With --json, one JSON line per batch size (bench/batch_decode.sh turns
// them into a table).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "coordinator/engine.h"
#include "coordinator/run_report.h"
#include "shared/family/family.h"

ABSL_FLAG(std::string, model, "", "model directory (with its pack)");
ABSL_FLAG(std::string, mem, "1G", "memory budget, as for generate");
ABSL_FLAG(int32_t, threads, 2, "compute threads");
ABSL_FLAG(std::string, workers, "", "expert workers host:port,... (optional)");
ABSL_FLAG(std::string, batches, "1,2,4,8", "batch sizes to run");
ABSL_FLAG(int32_t, steps, 12, "decode steps per batch size");
ABSL_FLAG(int32_t, prompt_tokens, 8, "prompt length of each sequence");
ABSL_FLAG(uint32_t, seed, 1, "seed of the random prompts");
ABSL_FLAG(int32_t, max_context, 1024,
          "positions each sequence's state is charged for, as serve does");

namespace flotilla {
namespace {

int Run() {
  coordinator::EngineOptions o;
  o.model_dir = absl::GetFlag(FLAGS_model);
  o.mem = absl::GetFlag(FLAGS_mem);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.max_context = absl::GetFlag(FLAGS_max_context);
  if (const std::string w = absl::GetFlag(FLAGS_workers); !w.empty()) {
    o.workers = absl::StrSplit(w, ',');
  }
  std::vector<int> batches;
  for (absl::string_view b :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(b, &n) || n < 1) {
      std::fprintf(stderr, "--batches: bad batch size '%s'\n",
                   std::string(b).c_str());
      return 2;
    }
    batches.push_back(n);
  }
  // The plan charges the largest batch's states up front, as `serve
  // --max-batch` does, so every batch size runs under the same plan.
  o.sequences = *std::max_element(batches.begin(), batches.end());
  const int steps = absl::GetFlag(FLAGS_steps);
  const int prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  if (o.model_dir.empty() || steps < 1 || prompt_tokens < 1) {
    std::fprintf(stderr, "need --model, --steps >= 1, --prompt-tokens >= 1\n");
    return 2;
  }
  auto engine = coordinator::OpenEngine(o);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  coordinator::LanguageModel& model = *(*engine)->model;
  auto spec = family::LoadMoeSpec(
      o.config_path.empty() ? o.model_dir + "/config.json" : o.config_path);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  const int moe_layers = spec->NumMoeLayers();
  std::mt19937 rng(absl::GetFlag(FLAGS_seed));
  std::uniform_int_distribution<int32_t> token(0, model.vocab_size() - 1);
  for (int n : batches) {
    std::vector<std::unique_ptr<coordinator::ModelSequence>> owned;
    std::vector<coordinator::ModelSequence*> seqs;
    std::vector<std::vector<int32_t>> next(n);
    for (int i = 0; i < n; ++i) {
      owned.push_back(model.StartSequence());
      seqs.push_back(owned.back().get());
      for (int t = 0; t < prompt_tokens; ++t) next[i].push_back(token(rng));
    }
    std::vector<std::vector<float>> logits;
    std::vector<double> step_seconds;
    coordinator::RunCounters at_decode;
    // Step 0 is the prefill; the counters start after it.
    for (int step = 0; step <= steps; ++step) {
      if (step == 1) at_decode = coordinator::SnapshotCounters(**engine);
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status s = model.ForwardBatch(seqs, next, &logits);
      if (!s.ok()) {
        std::fprintf(stderr, "batch %d step %d: %s\n", n, step,
                     s.ToString().c_str());
        return 1;
      }
      if (step > 0) {
        step_seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      for (int i = 0; i < n; ++i) {
        next[i] = {static_cast<int32_t>(
            std::max_element(logits[i].begin(), logits[i].end()) -
            logits[i].begin())};
      }
    }
    const coordinator::RunCounters now =
        coordinator::SnapshotCounters(**engine);
    std::sort(step_seconds.begin(), step_seconds.end());
    const double median = step_seconds[step_seconds.size() / 2];
    const double trunk =
        double(now.trunk.bytes_read - at_decode.trunk.bytes_read) / steps;
    const double experts =
        double(now.experts.bytes_read - at_decode.experts.bytes_read) / steps;
    const double used =
        double(now.experts.experts_used - at_decode.experts.experts_used) /
        steps;
    // Time the forward pass spent blocked on the disk: what is left of a
    // step is compute.
    const double wait =
        (now.trunk.wait_seconds - at_decode.trunk.wait_seconds +
         now.experts.io_wait_seconds - at_decode.experts.io_wait_seconds) /
        steps;
    std::printf(
        "{\"batch\": %d, \"steps\": %d, \"median_step_s\": %.4f, "
        "\"tokens_per_s\": %.3f, \"trunk_bytes_per_step\": %.0f, "
        "\"expert_bytes_per_step\": %.0f, \"experts_used_per_step\": %.1f, "
        "\"experts_per_moe_layer\": %.1f, \"io_wait_s_per_step\": %.4f}\n",
        n, steps, median, n / median, trunk, experts, used, used / moe_layers,
        wait);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace flotilla

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return flotilla::Run();
}
