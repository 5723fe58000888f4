// flotilla-tool pack: command line for tools/pack.h.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/io/memory_budget.h"
#include "tools/commands.h"
#include "tools/flag_parser.h"
#include "tools/pack.h"
#include "tools/pack_workers.h"

namespace flotilla::tools {
namespace {

constexpr char kPackUsage[] =
    "usage: flotilla-tool pack --model DIR [--out DIR] [--verify]\n"
    "           [--threads N] [--force] [--workers N [--replicas R | "
    "--split]]\n\n"
    "Packs a Kimi K3 checkpoint for streaming: writes trunk.bin (every\n"
    "layer's non-expert tensors, embedding, lm_head and model vectors as\n"
    "compute-ready regions at fixed 4 KiB-aligned offsets) and\n"
    "manifest.json (offsets, layouts, XXH3 checksums, source fingerprint).\n"
    "Experts are served in place from the shards when each is one\n"
    "contiguous run; otherwise they are copied into experts.bin.\n"
    "An interrupted pack resumes when run again. --verify re-reads every\n"
    "region and expert run and checks its checksum.\n"
    "--workers N also cuts the experts into <out>/workers/worker-K (K < N),\n"
    "one folder per expert worker holding only its share (R replicas of\n"
    "every expert on distinct workers); serve one with flotilla-expert-worker\n"
    "--model DIR --placement DIR/placement.json.\n"
    "--split (with --workers N) instead cuts every expert into N row slices:\n"
    "worker K holds slice K of every expert (split.json, no placement.json);\n"
    "serve one with flotilla-expert-worker --model DIR --split "
    "DIR/split.json.\n";

// Test hook: FLOTILLA_PACK_STOP_AFTER=K stops a pack after K regions /
// expert batches, as if it had been killed (kept out of --help).
constexpr char kStopEnv[] = "FLOTILLA_PACK_STOP_AFTER";

int PackFail(int code, const std::string& message) {
  std::fprintf(stderr, "flotilla-tool pack: %s\n", message.c_str());
  return code;
}

}  // namespace

int RunPack(int argc, char** argv) {
  PackOptions options;
  int64_t threads = options.threads;
  FlagParser flags(kPackUsage);
  flags.String("model", &options.model_dir,
               "checkpoint dir (config.json, *.safetensors)");
  flags.String("out", &options.out_dir,
               "pack dir (default: <model>/flotilla-pack)");
  flags.Bool("verify", &options.verify,
             "re-read everything and check every checksum");
  flags.Int("threads", &threads,
            "regions / expert batches in flight (default 2)");
  flags.Bool("force", &options.force,
             "overwrite a pack dir made from another checkpoint");
  int64_t workers = 0, replicas = 1;
  flags.Int("workers", &workers,
            "also write one expert folder per worker (0 = none)");
  flags.Int("replicas", &replicas,
            "with --workers: workers holding each expert (default 1)");
  bool split = false;
  flags.Bool("split", &split,
             "with --workers N: cut every expert into N row slices, worker K "
             "holds slice K of every expert");
  if (std::optional<int> code = flags.ParseOrExitCode(argc, argv, "pack")) {
    return *code;
  }
  if (options.model_dir.empty())
    return PackFail(kExitUsage, "--model is required");
  if (threads < 1 || threads > 64) {
    return PackFail(kExitUsage, "--threads must be in 1..64");
  }
  options.threads = static_cast<int>(threads);
  if (split && workers < 1) {
    return PackFail(kExitUsage, "--split requires --workers N (N >= 1)");
  }
  if (split && replicas != 1) {
    return PackFail(
        kExitUsage,
        "--split takes no --replicas: every worker holds one slice of "
        "every expert");
  }
  if (workers < 0 || workers > 4096 || replicas < 1 ||
      (workers > 0 && replicas > workers)) {
    return PackFail(
        kExitUsage,
        "--workers must be in 0..4096 and --replicas in 1..workers");
  }
  if (const char* stop = std::getenv(kStopEnv); stop != nullptr) {
    if (!absl::SimpleAtoi(stop, &options.stop_after_units) ||
        options.stop_after_units == 0) {
      return PackFail(kExitUsage, absl::StrCat(kStopEnv,
                                               ": expected a count "
                                               ">= 1, got '",
                                               stop, "'"));
    }
  }
  absl::StatusOr<PackResult> r = PackCheckpoint(options);
  if (!r.ok()) return PackFail(kExitFailure, std::string(r.status().message()));
  if (r->already_complete) {
    std::printf("pack: %s is up to date%s\n", r->pack_dir.c_str(),
                options.verify ? " and verified" : "");
  } else {
    const double rate = r->seconds > 0 ? r->bytes / r->seconds : 0;
    std::printf("pack: wrote %s (%s in %.1f s, %s/s%s; experts %s)%s\n",
                r->pack_dir.c_str(), io::FormatBytes(r->bytes).c_str(),
                r->seconds,
                io::FormatBytes(static_cast<uint64_t>(rate)).c_str(),
                r->resumed ? ", resumed" : "",
                r->experts_in_model_dir ? "served in place from the model dir"
                                        : "copied to experts.bin",
                options.verify ? "; verified" : "");
  }
  if (workers > 0) {
    PackWorkersOptions wo;
    wo.model_dir = options.model_dir;
    wo.out_dir = r->pack_dir + "/workers";
    wo.workers = static_cast<int>(workers);
    wo.replicas = static_cast<int>(replicas);
    wo.split = split;
    wo.threads = options.threads;
    wo.progress = options.progress;
    absl::StatusOr<PackWorkersResult> w = PackWorkers(wo);
    if (!w.ok())
      return PackFail(kExitFailure, std::string(w.status().message()));
    std::printf("pack: %d worker folders in %s (%d up to date, %s written)\n",
                static_cast<int>(workers), wo.out_dir.c_str(), w->skipped,
                io::FormatBytes(w->bytes).c_str());
  }
  return kExitOk;
}

}  // namespace flotilla::tools
