// flotilla-expert-worker: serves a shard of a model's routed experts over
// gRPC (ExpertService, health, reflection). See DESIGN.md §2 and §7.
//
// Exit codes: 0 success (and --help), 1 runtime failure (cannot read the
// model, cannot listen), 2 a flag value we validate is bad. absl rejects
// unknown flags and unparsable values itself, with exit code 1.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

ABSL_FLAG(std::string, model, "",
          "checkpoint folder (config.json, *.safetensors); required");
ABSL_FLAG(std::string, shard, "0/1",
          "K/N: serve shard K (zero-based) of N; expert e of every MoE layer "
          "belongs to shard e mod N");
ABSL_FLAG(int32_t, port, -1,
          "gRPC port to serve on; 0 picks a free port (printed at start); "
          "-1 (default) prints the shard plan and exits without serving");
ABSL_FLAG(std::string, host, "0.0.0.0", "address to bind when serving");
ABSL_FLAG(std::string, mem, "8G",
          "memory budget, bytes with optional K/M/G/T suffix (powers of 1024)");
ABSL_FLAG(int32_t, threads, 0,
          "expert compute threads; 0 = one per hardware thread");

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
      "usage: %s --model DIR [--shard K/N] [--port P] [--host ADDR]\n"
      "       [--mem SIZE] [--threads N]\n\n"
      "Serves shard K of N of a checkpoint's routed experts over gRPC\n"
      "(flotilla.v1.ExpertService, grpc.health.v1, server reflection).\n"
      "Stops cleanly on SIGINT/SIGTERM.\n\nflags:\n",
      kProgram);
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "expert-worker/main.cc")) {
      flags.push_back(flag);
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  for (const absl::CommandLineFlag* flag : flags) {
    std::printf("  --%s (default \"%s\")\n      %s\n",
                std::string(flag->Name()).c_str(), flag->DefaultValue().c_str(),
                flag->Help().c_str());
  }
  std::printf("  -h, --help\n      print this help and exit\n");
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
  absl::SetProgramUsageMessage(
      "Serves a shard of a model's routed experts over gRPC; see --help.");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr,
                 "%s: unexpected argument '%s' (every option is a --flag)\n",
                 kProgram, positional[1]);
    return kExitUsage;
  }

  namespace ew = flotilla::expert_worker;
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) return UsageError("model", "is required");

  const absl::StatusOr<ew::ShardSpec> shard =
      ew::ParseShardSpec(absl::GetFlag(FLAGS_shard));
  if (!shard.ok()) {
    return UsageError("shard", std::string(shard.status().message()));
  }

  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < -1 || port > 65535) {
    return UsageError("port", "must be in [0, 65535], or -1 not to serve");
  }
  const std::string host = absl::GetFlag(FLAGS_host);
  if (host.empty()) return UsageError("host", "must not be empty");

  const absl::StatusOr<uint64_t> mem_bytes =
      ew::ParseByteSize(absl::GetFlag(FLAGS_mem));
  if (!mem_bytes.ok()) {
    return UsageError("mem", std::string(mem_bytes.status().message()));
  }

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

  const absl::StatusOr<ew::ShardPlan> plan =
      ew::BuildShardPlan(model, *shard, *mem_bytes, threads);
  if (plan.status().code() == absl::StatusCode::kOutOfRange) {
    return UsageError("shard", std::string(plan.status().message()));
  }
  if (!plan.ok()) {
    // The model folder is a flag too: name it, since that is what to fix.
    std::fprintf(stderr, "%s: --model %s: %s\n", kProgram, model.c_str(),
                 std::string(plan.status().message()).c_str());
    return kExitRuntime;
  }
  std::fputs(ew::DescribeShardPlan(*plan).c_str(), stdout);
  std::fflush(stdout);
  if (port == -1) return 0;

  ew::ServeOptions serve;
  serve.host = host;
  serve.port = port;
  const absl::Status status = ew::ServeUntilSignal(*plan, serve);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram,
                 std::string(status.message()).c_str());
    return kExitRuntime;
  }
  return 0;
}
