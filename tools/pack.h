// `flotilla-tool pack`: turns a Hugging Face K3 checkpoint into the files
// the engine streams from (docs/streaming.md):
//   trunk.bin      every trunk region (BuildLayerRegion etc.) at the fixed,
//                  4 KiB-aligned offset of the plan (pack_plan.h);
//   experts.bin    only when some expert's tensors are not one contiguous
//                  run in one shard; otherwise experts are served in place;
//   manifest.json  pack::PackManifest, written last (complete=true);
//   pack.state     progress record while a pack is unfinished.
//
// Refuses to write into a pack dir of another checkpoint unless `force`.
// A killed pack resumes where it stopped when run again.
#ifndef FLOTILLA_TOOLS_PACK_H_
#define FLOTILLA_TOOLS_PACK_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace flotilla::tools {

struct PackOptions {
  std::string model_dir;  // required
  std::string out_dir;    // empty: <model_dir>/flotilla-pack
  // Regions built / expert batches processed at once. Each holds one region
  // (up to ~2.4 GB for K3's layer 0 and vocab matrices) or one 64 MiB batch.
  int threads = 2;
  bool force = false;   // overwrite a pack dir of another checkpoint
  bool verify = false;  // re-read and check every checksum afterwards
  // Expert runs are read (in place) or copied in batches of about this
  // many bytes: large reads, bounded memory per thread.
  uint64_t batch_bytes = uint64_t{64} << 20;
  // Test hook: stop (Aborted) once this many units (regions or expert
  // batches) are recorded; 0 = run to the end.
  uint64_t stop_after_units = 0;
  FILE* progress = stderr;  // null: silent
};

struct PackResult {
  std::string pack_dir;
  bool already_complete = false;  // an up-to-date pack was found
  bool resumed = false;           // continued an unfinished pack
  uint64_t units_done = 0;        // regions + expert batches done this run
  uint64_t bytes = 0;             // trunk bytes written + expert bytes
                                  // read (in place) or copied, this run
  double seconds = 0;
  bool experts_in_model_dir = true;
};

absl::StatusOr<PackResult> PackCheckpoint(const PackOptions& options);

// --out, else <model>/flotilla-pack, created if missing.
absl::StatusOr<std::string> MakePackDir(const PackOptions& options);

// Re-reads every region of `pack_dir` and every expert run (in the model
// dir or the pack dir) and checks it against the manifest's checksum. The
// error names the first mismatch: region or (layer, expert), file, offset.
// Also fails when the manifest's fingerprint is not the model dir's.
absl::Status VerifyPack(const std::string& model_dir,
                        const std::string& pack_dir, int threads,
                        FILE* progress);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_H_
