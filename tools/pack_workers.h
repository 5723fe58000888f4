// `flotilla-tool pack --workers N [--replicas R]`: cuts a checkpoint's
// routed experts into one folder per expert worker, so each machine copies
// only its share (DESIGN.md section 4):
//   <out>/worker-K/config.json          the checkpoint's config, verbatim
//   <out>/worker-K/experts.safetensors  worker K's experts under their HF
//                                       names, each expert's tensors back to
//                                       back (one read per expert)
//   <out>/worker-K/placement.json       the fleet's placement (rotate-v1),
//                                       "worker": K and the source
//                                       checkpoint's fingerprint; written
//                                       last, so its presence marks the
//                                       folder complete
// A worker serves it with
//   flotilla-expert-worker --model <out>/worker-K
//       --placement <out>/worker-K/placement.json
// and reports the source checkpoint's fingerprint, so a coordinator running
// the original checkpoint (or its trunk pack) accepts it.
#ifndef FLOTILLA_TOOLS_PACK_WORKERS_H_
#define FLOTILLA_TOOLS_PACK_WORKERS_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::tools {

struct PackWorkersOptions {
  std::string model_dir;    // the HF checkpoint
  std::string out_dir;      // receives worker-0 .. worker-(N-1)
  int workers = 1;          // N >= 1, at most the experts per layer
  int replicas = 1;         // 1 <= R <= N
  int threads = 2;          // producer threads of the writer
  FILE* progress = stderr;  // null: silent
};

struct PackWorkersResult {
  std::vector<std::string> folders;  // one per worker
  uint64_t bytes = 0;                // expert bytes written this run
  int skipped = 0;                   // folders already complete
  double seconds = 0;
};

// Writes (or completes) every worker folder. A folder whose placement.json
// already names this checkpoint, fleet and worker is left alone, so a killed
// run resumes at the first unfinished worker.
absl::StatusOr<PackWorkersResult> PackWorkers(const PackWorkersOptions& o);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_WORKERS_H_
