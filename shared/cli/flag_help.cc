#include "shared/cli/flag_help.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"

namespace flotilla::cli {

const char* Version() { return FLOTILLA_VERSION; }

void PrintFlags(std::FILE* out, const std::vector<absl::string_view>& folders) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string file = flag->Filename();
    for (absl::string_view folder : folders) {
      if (absl::StrContains(file, folder)) {
        flags.push_back(flag);
        break;
      }
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::fprintf(out, "\nflags:\n");
  for (const absl::CommandLineFlag* f : flags) {
    const std::string name = absl::StrReplaceAll(f->Name(), {{"_", "-"}});
    const std::string def = f->DefaultValue();
    std::fprintf(out, "  --%s (default: %s)\n      %s\n", name.c_str(),
                 def.empty() ? "\"\"" : def.c_str(), f->Help().c_str());
  }
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help") ||
        !std::strcmp(argv[i], "help")) {
      return true;
    }
  }
  return false;
}

bool WantsVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--version")) return true;
  }
  return false;
}

}  // namespace flotilla::cli
