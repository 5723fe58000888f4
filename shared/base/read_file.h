// Whole-file reads for command-line front ends (flotilla-coordinator,
// flotilla-tool), which print the error message as it stands: keep its
// wording, scripts and tests match on it.
#ifndef FLOTILLA_SHARED_BASE_READ_FILE_H_
#define FLOTILLA_SHARED_BASE_READ_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace flotilla::base {

// The bytes of `path`, read in binary mode. NotFound "cannot read <path>"
// when it cannot be opened (missing, unreadable, ...).
inline absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_READ_FILE_H_
