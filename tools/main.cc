// flotilla-tool: offline utilities around Kimi K3 checkpoints. Dispatches to
// one subcommand per file; to add one, declare it in commands.h, add a row
// to kCommands and its source file to flotilla-tool in CMakeLists.txt.
//
// Exit codes: 0 success (and --help), 1 runtime failure, 2 bad command line.
#include <cstdio>
#include <cstring>

#include "shared/cli/flag_help.h"
#include "tools/commands.h"

namespace {

using flotilla::tools::kExitOk;
using flotilla::tools::kExitUsage;

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"synth", flotilla::tools::RunSynth,
     "write a random-weight K3 checkpoint in the Hugging Face layout"},
    {"pack", flotilla::tools::RunPack,
     "write trunk.bin + manifest.json for streaming (resumable, --verify)"},
    {"doctor", flotilla::tools::RunDoctor,
     "measure RAM and disk; recommend a budget, predict s/token"},
};

void PrintUsage(FILE* out) {
  std::fputs(
      "usage: flotilla-tool <command> [flags]\n"
      "       flotilla-tool <command> --help\n\n"
      "commands:\n",
      out);
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  const char* name = argv[1];
  if (!std::strcmp(name, "--help") || !std::strcmp(name, "-h") ||
      !std::strcmp(name, "help")) {
    PrintUsage(stdout);
    return kExitOk;
  }
  if (!std::strcmp(name, "--version")) {
    std::printf("flotilla-tool %s\n", flotilla::cli::Version());
    return kExitOk;
  }
  for (const Command& c : kCommands) {
    if (!std::strcmp(name, c.name)) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "flotilla-tool: unknown command '%s'; commands:", name);
  for (const Command& c : kCommands) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, " (see flotilla-tool --help)\n");
  return kExitUsage;
}
