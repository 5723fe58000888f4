// flotilla-bench-disk: O_DIRECT random reads of one size at one queue depth
// over one or more files, printed as JSON. The streaming bench runs it in the
// same session as the engine, so "the disk's ceiling" and the engine's read
// rate come from the same machine state.
//
// usage: flotilla-bench-disk --size BYTES --qd N --seconds S FILE...
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "shared/io/disk_probe.h"
#include "shared/io/memory_budget.h"

int main(int argc, char** argv) {
  uint64_t size = 0;
  int qd = 32;
  double seconds = 3;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--size" || a == "--qd" || a == "--seconds") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--size") {
        auto s = flotilla::io::ParseByteSize(v);
        if (!s.ok()) {
          std::fprintf(stderr, "--size: %s\n", s.status().ToString().c_str());
          return 2;
        }
        size = *s;
      } else if (a == "--qd") {
        qd = std::atoi(v.c_str());
      } else {
        seconds = std::atof(v.c_str());
      }
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (size == 0 || qd < 1 || !(seconds > 0) || files.empty()) {
    std::fprintf(stderr,
                 "usage: flotilla-bench-disk --size BYTES --qd N --seconds S "
                 "FILE...\n");
    return 2;
  }
  // Spread the time over the files (the model's shards), then pool.
  uint64_t bytes = 0;
  double secs = 0;
  bool direct = true;
  for (const std::string& f : files) {
    auto r =
        flotilla::io::ProbeRandomReads(f, size, qd, seconds / files.size(), 0);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", f.c_str(),
                   r.status().ToString().c_str());
      return 1;
    }
    bytes += r->bytes;
    secs += r->seconds;
    direct = direct && r->direct;
  }
  nlohmann::json j = {{"read_size", size},
                      {"queue_depth", qd},
                      {"bytes", bytes},
                      {"seconds", secs},
                      {"gb_per_s", bytes / secs / 1e9},
                      {"direct", direct}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
