// flotilla-tool doctor: command line for tools/doctor.h.
#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/io/memory_budget.h"
#include "tools/commands.h"
#include "tools/doctor.h"
#include "tools/flag_parser.h"

namespace flotilla::tools {
namespace {

constexpr char kDoctorUsage[] =
    "usage: flotilla-tool doctor [--model DIR] [--path DIR]\n"
    "           [--disk-seconds S] [--scratch-size SIZE] [--max-context N]\n"
    "           [--mem SIZE,...] [--threads N] [--positions N]\n"
    "           [--workers N] [--draft-tokens G --tokens-per-pass X]\n\n"
    "Measures RAM and the disk (O_DIRECT random reads, as fio measures them:\n"
    "expert-sized reads at queue depths 1, 8, 32; 64 MiB reads at 1, 4, 32),\n"
    "and with --model (any supported family) times the engine's kernels on\n"
    "this machine at the model's shapes (trunk and expert matvecs, the\n"
    "recurrent step, attention, checksums), then\n"
    "recommends a memory budget and predicts seconds per token for each\n"
    "preset and --mem budget: compute at those rates overlapped with the\n"
    "plan's reads (experts at the QD32 figure, trunk at 64 MiB x QD4, read\n"
    "into 2 MiB pages like the engine's buffers; also at 4 KiB pages, what\n"
    "the engine gets where transparent huge pages are off). The disk is\n"
    "measured on a scratch file of random data in --path (default: the model\n"
    "dir, else the current dir), removed afterwards, or read-only on the\n"
    "model's shards when they total 2 GiB or more.\n";

int DoctorFail(int code, const std::string& message) {
  std::fprintf(stderr, "flotilla-tool doctor: %s\n", message.c_str());
  return code;
}

}  // namespace

int RunDoctor(int argc, char** argv) {
  DoctorOptions options;
  std::string seconds = "3", scratch = "3G";
  int64_t max_context = options.max_context;
  int64_t threads = 0, positions = options.positions;
  int64_t workers = options.fleet_workers;
  int64_t guesses = 0;
  std::string budgets, per_pass = "0";
  FlagParser flags(kDoctorUsage);
  flags.String("model", &options.model_dir,
               "model dir to plan for (config.json, shards or a pack)");
  flags.String("path", &options.path, "dir on the disk to measure");
  flags.String("disk-seconds", &seconds,
               "timed seconds per disk probe (default 3)");
  flags.String("scratch-size", &scratch, "scratch file size (default 3G)");
  flags.Int("max-context", &max_context,
            "positions of KV/state to reserve (default 4096)");
  flags.String("mem", &budgets,
               "budgets to predict besides the presets, comma-separated "
               "(e.g. 1G,2G,4G)");
  flags.Int("threads", &threads,
            "compute threads, as generate --threads (default 0 = all)");
  flags.Int("positions", &positions,
            "cached positions attention is predicted at (default 256)");
  flags.Int("workers", &workers,
            "expert workers to show each one's reads per token for "
            "(default 4)");
  flags.Int("draft-tokens", &guesses,
            "with --tokens-per-pass: predict speculative passes checking "
            "this many guesses (1..64)");
  flags.String("tokens-per-pass", &per_pass,
               "tokens a speculative pass yields (1 .. draft-tokens + 1; "
               "default 0 = plain decoding)");
  if (std::optional<int> code = flags.ParseOrExitCode(argc, argv, "doctor")) {
    return *code;
  }
  if (!absl::SimpleAtod(seconds, &options.disk_seconds) ||
      !(options.disk_seconds > 0 && options.disk_seconds <= 600)) {
    return DoctorFail(kExitUsage,
                      absl::StrCat("--disk-seconds: expected a number "
                                   "in (0, 600], got '",
                                   seconds, "'"));
  }
  absl::StatusOr<uint64_t> bytes = io::ParseByteSize(scratch);
  if (!bytes.ok()) {
    return DoctorFail(
        kExitUsage, absl::StrCat("--scratch-size: ", bytes.status().message()));
  }
  options.scratch_bytes = *bytes;
  if (max_context < 1 || max_context > (1 << 24)) {
    return DoctorFail(kExitUsage, "--max-context must be in 1..16777216");
  }
  options.max_context = static_cast<int>(max_context);
  if (threads < 0 || threads > 1024) {
    return DoctorFail(kExitUsage, "--threads must be in 0..1024");
  }
  options.threads = static_cast<int>(threads);
  if (positions < 1 || positions > max_context) {
    return DoctorFail(kExitUsage, "--positions must be in 1..--max-context");
  }
  options.positions = static_cast<int>(positions);
  if (workers < 1 || workers > 4096) {
    return DoctorFail(kExitUsage, "--workers must be in 1..4096");
  }
  options.fleet_workers = static_cast<int>(workers);
  double tokens_per_pass = 0;
  if (!absl::SimpleAtod(per_pass, &tokens_per_pass)) {
    return DoctorFail(kExitUsage, absl::StrCat("--tokens-per-pass: expected a "
                                               "number, got '",
                                               per_pass, "'"));
  }
  if (tokens_per_pass != 0) {
    if (guesses < 1 || guesses > 64 || !(tokens_per_pass >= 1) ||
        tokens_per_pass > guesses + 1) {
      return DoctorFail(kExitUsage,
                        "--tokens-per-pass must be in 1 .. --draft-tokens + 1, "
                        "with --draft-tokens in 1..64");
    }
    options.guesses = static_cast<int>(guesses);
    options.tokens_per_pass = tokens_per_pass;
  }
  for (absl::string_view b : absl::StrSplit(budgets, ',', absl::SkipEmpty())) {
    absl::StatusOr<uint64_t> v = io::ResolveBudget(std::string(b));
    if (!v.ok()) {
      return DoctorFail(kExitUsage,
                        absl::StrCat("--mem ", b, ": ", v.status().message()));
    }
    options.budgets.push_back(std::string(b));
  }
  if (absl::Status s = RunDoctorChecks(options, stdout); !s.ok()) {
    return DoctorFail(kExitFailure, std::string(s.message()));
  }
  return kExitOk;
}

}  // namespace flotilla::tools
