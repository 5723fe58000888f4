// flotilla-expert-worker: serves a shard of a model's routed experts over
// gRPC (ExpertService, health, reflection). See docs/workers.md.
//
// Exit codes: 0 success (and --help), 1 runtime failure (cannot read the
// model, cannot listen), 2 a flag value we validate is bad. absl rejects
// unknown flags and unparsable values itself, with exit code 1.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "expert-worker/server.h"
#include "expert-worker/shard_plan.h"
#include "shared/cli/flag_help.h"
#include "shared/kernels/kernels.h"

ABSL_FLAG(std::string, model, "",
          "checkpoint folder (config.json, *.safetensors); required");
ABSL_FLAG(std::string, shard, "",
          "K/N: this is worker K (zero-based) of N (default 0/1); experts are "
          "placed by the rotate-v1 rule: expert e of layer l has primary "
          "(e + l) mod N (shared/placement)");
ABSL_FLAG(int32_t, replicas, 1,
          "R: every expert is held by R distinct workers of the N (with "
          "--shard); the coordinator retries on a replica when one fails");
ABSL_FLAG(std::string, placement, "",
          "placement JSON file (e.g. placement.json written by `flotilla-tool "
          "pack --workers`) instead of --shard/--replicas");
ABSL_FLAG(std::string, split, "",
          "split.json of a `flotilla-tool pack --workers N --split` folder: "
          "this worker holds row slice K of every expert (instead of "
          "--shard/--placement; see docs/workers.md)");
ABSL_FLAG(int32_t, port, -1,
          "gRPC port to serve on; 0 picks a free port (printed at start); "
          "-1 (default) prints the shard plan and exits without serving");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to bind when serving (default: this machine only; a "
          "fleet names its address or 0.0.0.0, with --tls-cert)");
ABSL_FLAG(std::string, mem, "8G",
          "memory budget, bytes with optional K/M/G/T suffix (powers of 1024)");
ABSL_FLAG(int32_t, threads, 0,
          "expert compute threads; 0 = one per hardware thread");
ABSL_FLAG(std::string, simd, "auto",
          "kernel SIMD path: auto (the fastest), scalar, avx2, avx512 or "
          "highway; all give the same bits");
ABSL_FLAG(int32_t, fetch_slots, 16,
          "expert runs read / computed at once (each one expert's size)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls-cert");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Prometheus metrics at http://HOST:PORT/metrics (0 = any free "
          "port, -1 = off)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA: require client certificates signed by it (mutual TLS)");

namespace {

constexpr char kProgram[] = "flotilla-expert-worker";
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
// More threads than this is a typo, not a machine.
constexpr int kMaxThreads = 4096;

// Prints usage from the flag registry itself, so the text can never drift
// from the flags' real names, defaults and help strings.
void PrintUsage() {
  std::printf(
      "usage: %s --model DIR\n"
      "       (--shard K/N [--replicas R] | --placement FILE | --split FILE)\n"
      "       [--port P] [--host ADDR] [--mem SIZE] [--threads N]\n"
      "       [--fetch-slots S]\n"
      "       [--tls-cert F --tls-key F [--tls-ca F]]\n\n"
      "Serves worker K of N's share of a checkpoint's routed experts over\n"
      "gRPC (flotilla.v1.ExpertService, grpc.health.v1, server reflection),\n"
      "reading them with O_DIRECT from the HF shards in place or from a\n"
      "`flotilla-tool pack --workers` folder. Stops cleanly on "
      "SIGINT/SIGTERM.\n"
      "Flag names take dashes or underscores.\n",
      kProgram);
  flotilla::cli::PrintFlags(stdout, {"expert-worker/"});
}

// absl's own --help exits with status 1 and does not know -h; users and
// scripts expect `--help` to succeed, so we answer it before absl parses.
bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return false;
    if (std::strcmp(argv[i], "-h") == 0 ||
        std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0) {
      return true;
    }
  }
  return false;
}

int UsageError(const std::string& flag, const std::string& message) {
  std::fprintf(stderr, "%s: --%s: %s\n(run %s --help for usage)\n", kProgram,
               flag.c_str(), message.c_str(), kProgram);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  if (WantsHelp(argc, argv)) {
    PrintUsage();
    return 0;
  }
  if (flotilla::cli::WantsVersion(argc, argv)) {
    std::printf("%s %s\n", kProgram, flotilla::cli::Version());
    return 0;
  }
  absl::SetProgramUsageMessage(
      "Serves a shard of a model's routed experts over gRPC; see --help.");
  // Documented flags use dashes (--tls-cert); absl names use underscores.
  // Translate names, never values.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t j = 2; j < end; ++j) {
      if (arg[j] == '-') arg[j] = '_';
    }
  }
  std::vector<char*> new_argv;
  for (std::string& a : args) new_argv.push_back(a.data());
  new_argv.push_back(nullptr);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), new_argv.data());
  if (positional.size() > 1) {
    std::fprintf(stderr,
                 "%s: unexpected argument '%s' (every option is a --flag)\n",
                 kProgram, positional[1]);
    return kExitUsage;
  }

  namespace ew = flotilla::expert_worker;
  ew::PlanOptions options;
  options.model_dir = absl::GetFlag(FLAGS_model);
  if (options.model_dir.empty()) return UsageError("model", "is required");

  const std::string shard_text = absl::GetFlag(FLAGS_shard);
  options.shard_given = !shard_text.empty();
  if (options.shard_given) {
    const absl::StatusOr<ew::ShardSpec> shard = ew::ParseShardSpec(shard_text);
    if (!shard.ok()) {
      return UsageError("shard", std::string(shard.status().message()));
    }
    options.shard = *shard;
  }
  options.replicas = absl::GetFlag(FLAGS_replicas);
  options.placement_file = absl::GetFlag(FLAGS_placement);
  if (!options.placement_file.empty() && options.replicas != 1) {
    return UsageError("replicas",
                      "comes from the --placement file; do not give both");
  }
  if (options.replicas < 1) return UsageError("replicas", "must be >= 1");
  options.split_file = absl::GetFlag(FLAGS_split);
  if (!options.split_file.empty() &&
      (!options.placement_file.empty() || options.replicas != 1)) {
    return UsageError("split",
                      "cannot be combined with --placement or --replicas (a "
                      "split fleet holds every expert once, cut by rows)");
  }

  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < -1 || port > 65535) {
    return UsageError("port", "must be in [0, 65535], or -1 not to serve");
  }
  ew::ServeOptions serve;
  serve.host = absl::GetFlag(FLAGS_host);
  serve.port = port;
  if (serve.host.empty()) return UsageError("host", "must not be empty");
  serve.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (serve.metrics_port < -1 || serve.metrics_port > 65535) {
    return UsageError("metrics-port", "must be in [0, 65535], or -1 for none");
  }
  serve.tls.cert = absl::GetFlag(FLAGS_tls_cert);
  serve.tls.key = absl::GetFlag(FLAGS_tls_key);
  serve.tls.ca = absl::GetFlag(FLAGS_tls_ca);
  if (serve.tls.enabled() &&
      (serve.tls.cert.empty() || serve.tls.key.empty())) {
    return UsageError(serve.tls.cert.empty() ? "tls-cert" : "tls-key",
                      "TLS needs both --tls-cert and --tls-key");
  }

  const absl::StatusOr<uint64_t> mem_bytes =
      ew::ParseByteSize(absl::GetFlag(FLAGS_mem));
  if (!mem_bytes.ok()) {
    return UsageError("mem", std::string(mem_bytes.status().message()));
  }
  options.memory_budget_bytes = *mem_bytes;

  int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0 || threads > kMaxThreads) {
    return UsageError("threads",
                      "must be in [0, 4096] (0 = one per "
                      "hardware thread)");
  }
  if (threads == 0) {
    // hardware_concurrency may report 0 when unknown.
    threads = std::max(1u, std::thread::hardware_concurrency());
  }
  options.compute_threads = threads;
  const std::string simd_error =
      flotilla::kernels::UseSimdLevelNamed(absl::GetFlag(FLAGS_simd).c_str());
  if (!simd_error.empty()) return UsageError("simd", simd_error);
  std::printf(
      "%s: SIMD kernels: %s\n", kProgram,
      flotilla::kernels::SimdLevelName(flotilla::kernels::ActiveSimdLevel()));
  ew::ComputeOptions compute_options;
  compute_options.fetch_slots = absl::GetFlag(FLAGS_fetch_slots);
  compute_options.max_response_bytes = ew::kMaxMessageBytes;
  if (compute_options.fetch_slots < 1 || compute_options.fetch_slots > 4096) {
    return UsageError("fetch-slots", "must be in [1, 4096]");
  }

  // Before any thread exists (the compute pool and readers start below).
  if (absl::Status s = ew::BlockShutdownSignals(); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram,
                 std::string(s.message()).c_str());
    return kExitRuntime;
  }
  absl::StatusOr<ew::ShardPlan> plan = ew::BuildShardPlan(options);
  if (plan.status().code() == absl::StatusCode::kOutOfRange) {
    return UsageError(!options.split_file.empty()      ? "split"
                      : options.placement_file.empty() ? "shard"
                                                       : "placement",
                      std::string(plan.status().message()));
  }
  if (!plan.ok()) {
    // The model folder is a flag too: name it, since that is what to fix.
    std::fprintf(stderr, "%s: --model %s: %s\n", kProgram,
                 options.model_dir.c_str(),
                 std::string(plan.status().message()).c_str());
    return kExitRuntime;
  }
  std::fputs(ew::DescribeShardPlan(*plan).c_str(), stdout);
  std::fflush(stdout);
  if (port == -1) return 0;

  absl::StatusOr<std::unique_ptr<ew::ExpertCompute>> compute =
      ew::ExpertCompute::Create(*plan, compute_options);
  if (!compute.ok()) {
    std::fprintf(stderr, "%s: --model %s: %s\n", kProgram,
                 options.model_dir.c_str(),
                 std::string(compute.status().message()).c_str());
    return kExitRuntime;
  }
  plan->pack_manifest.reset();  // indexed by the compute; not needed again
  const absl::Status status = ew::ServeUntilSignal(compute->get(), serve);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram,
                 std::string(status.message()).c_str());
    return kExitRuntime;
  }
  return 0;
}
