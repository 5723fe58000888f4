#include "shared/testing/process.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace flotilla::testutil {

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string BinPath(const std::string& name) {
  return std::string(FLOTILLA_BIN_DIR) + "/" + name;
}

CommandResult RunCommand(const std::string& command,
                         const std::string& scratch_dir) {
  const std::string out = scratch_dir + "/stdout";
  const std::string err = scratch_dir + "/stderr";
  const std::string cmd =
      "(" + command + ") >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CommandResult r;
  // sh reports a child's death by signal as exit status 128 + signal.
  r.exited = WIFEXITED(status) && WEXITSTATUS(status) < 128;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFileBytes(out);
  r.err = ReadFileBytes(err);
  return r;
}

}  // namespace flotilla::testutil
