// flotilla-tool synth: command line for tools/synth.h.
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/read_file.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "tools/commands.h"
#include "tools/flag_parser.h"
#include "tools/synth.h"
#include "tools/synth_config.h"

namespace flotilla::tools {
namespace {

constexpr char kSynthUsage[] =
    "usage: flotilla-tool synth (--preset NAME | --config FILE) --out DIR\n"
    "           [--seed S] [--shards auto|N] [--threads N] [--force]\n"
    "           [--config-only] [--dry-run] [--buffered]\n\n"
    "Writes a random-weight Kimi K3 checkpoint in the Hugging Face layout:\n"
    "config.json (nested form), model.safetensors.index.json and one shard\n"
    "per layer plus one for the embedding, lm_head and model-level vectors.\n"
    "The same seed gives byte-identical files. Refuses a non-empty --out\n"
    "without --force, and a checkpoint the disk cannot hold.\n";

int SynthFail(int code, const std::string& message) {
  std::fprintf(stderr, "flotilla-tool synth: %s\n", message.c_str());
  return code;
}

std::string Human(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  }
  return buf;
}

// One status line: rewritten in place on a terminal, else a new line every
// few seconds so that logs stay short.
void ReportProgress(const SynthProgress& p, bool tty) {
  const double mbps = p.seconds > 0 ? p.bytes_done / p.seconds / 1e6 : 0;
  const double left = p.bytes_total > p.bytes_done && mbps > 0
                          ? (p.bytes_total - p.bytes_done) / (mbps * 1e6)
                          : 0;
  std::fprintf(
      stderr, "%ssynth: shard %d/%d, %s / %s (%.0f%%), %.0f MB/s, ETA %.0f s%s",
      tty ? "\r" : "", p.shard, p.shards, Human(p.bytes_done).c_str(),
      Human(p.bytes_total).c_str(),
      p.bytes_total ? 100.0 * p.bytes_done / p.bytes_total : 100.0, mbps, left,
      tty ? "   " : "\n");
  std::fflush(stderr);
}

}  // namespace

int RunSynth(int argc, char** argv) {
  std::string preset, config_path, out, shards_text = "auto";
  uint64_t seed = 0;
  int64_t threads = 0;
  bool force = false, config_only = false, dry_run = false, buffered = false;
  FlagParser flags(kSynthUsage);
  flags.String("preset", &preset, "k3-tiny, k3-bench or k3-full");
  flags.String("config", &config_path, "any K3 config.json (flat or nested)");
  flags.String("out", &out, "output directory");
  flags.Uint64("seed", &seed, "random seed (default 0)");
  flags.String("shards", &shards_text, "auto (one per layer + 1) or a count");
  flags.Int("threads", &threads, "generator threads (0 = all cores)");
  flags.Bool("force", &force, "overwrite a non-empty --out; allow k3-full");
  flags.Bool("config-only", &config_only, "write only config.json");
  flags.Bool("dry-run", &dry_run, "print the files and sizes, write nothing");
  flags.Bool("buffered", &buffered, "use the page cache instead of O_DIRECT");
  if (std::optional<int> code = flags.ParseOrExitCode(argc, argv, "synth")) {
    return *code;
  }
  if (preset.empty() == config_path.empty()) {
    return SynthFail(kExitUsage, "give exactly one of --preset or --config");
  }
  if (out.empty() && !dry_run)
    return SynthFail(kExitUsage, "--out is required");
  int shards = 0;
  if (shards_text != "auto" &&
      (!absl::SimpleAtoi(shards_text, &shards) || shards < 1)) {
    return SynthFail(kExitUsage,
                     absl::StrCat("--shards: expected auto or a count "
                                  ">= 1, got '",
                                  shards_text, "'"));
  }
  if (threads < 0 || threads > 256) {
    return SynthFail(kExitUsage, "--threads must be in 0..256");
  }

  bool needs_force = false;
  absl::StatusOr<model::K3Config> config;
  if (!preset.empty()) {
    config = SynthPresetConfig(preset);
    if (!config.ok())
      return SynthFail(kExitUsage, std::string(config.status().message()));
    for (const SynthPreset& p : SynthPresets()) {
      if (preset == p.name) needs_force = p.needs_force;
    }
  } else {
    auto text = base::ReadWholeFile(config_path);
    if (!text.ok())
      return SynthFail(kExitFailure, std::string(text.status().message()));
    config = model::ParseK3Config(*text, config_path);
    if (!config.ok())
      return SynthFail(kExitFailure, std::string(config.status().message()));
  }

  if (config_only) {
    if (dry_run) return kExitOk;
    if (absl::Status s = PrepareOutDir(out, force, 1 << 20); !s.ok()) {
      return SynthFail(kExitFailure, std::string(s.message()));
    }
    if (absl::Status s = WriteSynthConfig(*config, out); !s.ok()) {
      return SynthFail(kExitFailure, std::string(s.message()));
    }
    std::printf("wrote %s/config.json\n", out.c_str());
    return kExitOk;
  }

  auto files = PlanSynthFiles(*config, shards);
  if (!files.ok())
    return SynthFail(kExitUsage, std::string(files.status().message()));
  uint64_t total = 0;
  for (const SynthFile& f : *files) total += f.bytes;
  if (dry_run) {
    for (const SynthFile& f : *files) {
      std::printf("%-40s %16llu bytes %8zu tensors\n", f.name.c_str(),
                  static_cast<unsigned long long>(f.bytes), f.tensors);
    }
    std::printf("total %llu bytes (%s) in %zu files\n",
                static_cast<unsigned long long>(total), Human(total).c_str(),
                files->size());
    return kExitOk;
  }
  if (needs_force && !force) {
    return SynthFail(
        kExitUsage,
        absl::StrCat("preset ", preset, " is ", total, " bytes (", Human(total),
                     "); pass --force to write it, or "
                     "--config-only for just config.json"));
  }
  if (absl::Status s = PrepareOutDir(out, force, total); !s.ok()) {
    return SynthFail(kExitFailure, std::string(s.message()));
  }

  const bool tty = isatty(STDERR_FILENO);
  SynthOptions o;
  o.config = *config;
  o.out_dir = out;
  o.seed = seed;
  o.shards = shards;
  o.threads = static_cast<int>(threads);
  o.direct_io = !buffered;
  o.progress_interval_s = tty ? 0.5 : 5.0;
  o.on_progress = [tty](const SynthProgress& p) { ReportProgress(p, tty); };
  auto result = WriteSynthCheckpoint(o);
  if (tty) std::fputc('\n', stderr);
  if (!result.ok()) return SynthFail(kExitFailure, result.status().ToString());
  std::printf("wrote %s: %d shards, %llu bytes (%s) in %.2f s, %.0f MB/s%s\n",
              out.c_str(), result->shards,
              static_cast<unsigned long long>(result->bytes),
              Human(result->bytes).c_str(), result->seconds,
              result->seconds > 0 ? result->bytes / result->seconds / 1e6 : 0.0,
              result->direct_io ? " (O_DIRECT)" : " (buffered)");
  return kExitOk;
}

}  // namespace flotilla::tools
