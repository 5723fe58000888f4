// flotilla-bench-disk: O_DIRECT random reads of one size at one queue depth
// over one or more files, printed as JSON. The streaming bench runs it in the
// same session as the engine, so "the disk's ceiling" and the engine's read
// rate come from the same machine state.
//
// usage: flotilla-bench-disk --size BYTES --qd N --seconds S [--huge-pages]
//            FILE...
// (--seconds: the timed steady-state window; --huge-pages: read into 2 MiB
// pages, see shared/io/disk_probe.h)
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
  bool huge_pages = false;
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
    } else if (a == "--huge-pages") {
      huge_pages = true;
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
                 "[--huge-pages] FILE...\n");
    return 2;
  }
  // One offset space over all the files (the model's shards), like fio's
  // --filename=a:b:c, timed as one steady-state window.
  flotilla::io::DiskProbeOptions o;
  o.read_size = size;
  o.queue_depth = qd;
  o.seconds = seconds;
  o.huge_pages = huge_pages;
  auto r = flotilla::io::ProbeRandomReads(files, o);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  nlohmann::json j = {{"read_size", r->read_size},
                      {"queue_depth", qd},
                      {"bytes", r->bytes},
                      {"seconds", r->seconds},
                      {"gb_per_s", r->gb_per_s},
                      {"mean_queue_depth", r->mean_queue_depth},
                      {"total_bytes", r->total_bytes},
                      {"span_bytes", r->span_bytes},
                      {"p50_ms", r->p50_ms},
                      {"p99_ms", r->p99_ms},
                      {"reader", r->reader},
                      {"huge_page_fraction", r->huge_page_fraction},
                      {"direct", r->direct}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
