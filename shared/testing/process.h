// Running the project's binaries from tests, as a user would.
#ifndef FLOTILLA_SHARED_TESTING_PROCESS_H_
#define FLOTILLA_SHARED_TESTING_PROCESS_H_

#include <string>

namespace flotilla::testutil {

struct CommandResult {
  bool exited = false;  // false: killed by a signal (a crash)
  int code = -1;
  std::string out, err;
};

// Runs `command` through /bin/sh with stdin from /dev/null, capturing
// stdout/stderr through files in `scratch_dir`.
CommandResult RunCommand(const std::string& command,
                         const std::string& scratch_dir);

// Path of a built binary: FLOTILLA_BIN_DIR/<name>.
std::string BinPath(const std::string& name);

// Whole file as bytes ("" when missing).
std::string ReadFileBytes(const std::string& path);

}  // namespace flotilla::testutil

#endif  // FLOTILLA_SHARED_TESTING_PROCESS_H_
