// `flotilla-tool pack --workers N [--replicas R]`: cuts a checkpoint's
// routed experts into one folder per expert worker, so each machine copies
// only its share (docs/workers.md):
//   <out>/worker-K/config.json          the checkpoint's config, verbatim
//   <out>/worker-K/experts.safetensors  worker K's experts under their HF
//                                       names, each expert's tensors back to
//                                       back (one read per expert)
//   <out>/worker-K/expert_checksums.bin XXH3-64 of each expert's run, from
//                                       one read of the written file; the
//                                       worker verifies every read against
//                                       it (shared/experts/expert_checksums.h)
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
//
// With `split` (`pack --workers N --split`, shared/placement/expert_split.h)
// every expert is cut by rows instead and worker K holds slice K of EVERY
// routed expert:
//   <out>/worker-K/config.json          verbatim, as above
//   <out>/worker-K/experts.safetensors  every expert's tensors under their HF
//                                       names, holding only rows
//                                       inter_rows() (w1, w3) or
//                                       latent_rows() (w2); the first dim is
//                                       the slice size
//   <out>/worker-K/expert_checksums.bin as above, of the slices
//   <out>/worker-K/split.json           the ExpertSplit (N, K, I, L, source
//                                       fingerprint); written last
// A split folder has no placement.json and a whole-expert one no split.json.
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
  int workers = 1;          // N >= 1, at most the experts per layer (split:
                            // at most I and L)
  int replicas = 1;         // 1 <= R <= N; must be 1 with `split`
  bool split = false;       // row slices of every expert (see above)
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
// (split.json with `split`) already names this checkpoint, fleet and worker
// is left alone, so a killed run resumes at the first unfinished worker.
// With `split`, InvalidArgument (before writing anything) when replicas !=
// 1, N exceeds moe_intermediate_size or routed_expert_hidden_size, or an
// expert tensor's first dim is not I (w1, w3) or L (w2).
absl::StatusOr<PackWorkersResult> PackWorkers(const PackWorkersOptions& o);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_WORKERS_H_
