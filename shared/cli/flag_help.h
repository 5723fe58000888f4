// What every Flotilla binary prints for --help and --version: the usage
// lines, then each flag of its own sources with its default and meaning
// (absl's own --help lists only the main file's flags, and the serve flags
// live in serve_main.cc), and the version.
#ifndef FLOTILLA_SHARED_CLI_FLAG_HELP_H_
#define FLOTILLA_SHARED_CLI_FLAG_HELP_H_

#include <cstdio>
#include <vector>

#include "absl/strings/string_view.h"

namespace flotilla::cli {

// The project version ("0.10.0").
const char* Version();

// "--flag-name (default: X)\n    help text" for every absl flag defined in
// a source file whose path contains one of `folders` ("coordinator/"),
// sorted by name, dashes as the documented spelling.
void PrintFlags(std::FILE* out, const std::vector<absl::string_view>& folders);

// Whether argv (after argv[0]) holds -h, --help or help; --version.
bool WantsHelp(int argc, char** argv);
bool WantsVersion(int argc, char** argv);

}  // namespace flotilla::cli

#endif  // FLOTILLA_SHARED_CLI_FLAG_HELP_H_
