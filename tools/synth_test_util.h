// Test helper: k3-tiny checkpoints synthesized once per test process into a
// private temporary directory, removed at exit.
#ifndef FLOTILLA_TOOLS_SYNTH_TEST_UTIL_H_
#define FLOTILLA_TOOLS_SYNTH_TEST_UTIL_H_

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tools/synth.h"
#include "tools/synth_config.h"

namespace flotilla::tools {

struct SynthDirs {
  std::string root;
  std::string a;  // seed 7, 2 threads, O_DIRECT, default buffers
  std::string b;  // seed 7, 1 thread, buffered, 64 KiB buffers
  std::string c;  // seed 8

  ~SynthDirs() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

inline void SynthTiny(const std::string& dir, uint64_t seed, int threads,
                      bool direct, size_t buffer_bytes) {
  SynthOptions o;
  o.config = *SynthPresetConfig("k3-tiny");
  o.out_dir = dir;
  o.seed = seed;
  o.threads = threads;
  o.direct_io = direct;
  o.buffer_bytes = buffer_bytes;
  absl::Status s = PrepareOutDir(dir, false, 0);
  ASSERT_TRUE(s.ok()) << s;
  auto r = WriteSynthCheckpoint(o);
  ASSERT_TRUE(r.ok()) << r.status();
}

inline const SynthDirs& TinyDirs() {
  static SynthDirs* dirs = [] {
    auto* d = new SynthDirs;
    d->root = (std::filesystem::temp_directory_path() /
               ("flotilla_synth_" + std::to_string(getpid())))
                  .string();
    std::filesystem::remove_all(d->root);
    d->a = d->root + "/a";
    d->b = d->root + "/b";
    d->c = d->root + "/c";
    SynthTiny(d->a, 7, 2, true, 0);
    SynthTiny(d->b, 7, 1, false, 64 << 10);
    SynthTiny(d->c, 8, 2, true, 0);
    return d;
  }();
  // Deleted (and the directory removed) when the process exits.
  static std::unique_ptr<SynthDirs> owner(dirs);
  return *dirs;
}

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_SYNTH_TEST_UTIL_H_
