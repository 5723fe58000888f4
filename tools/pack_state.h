// The progress record of an unfinished pack (pack.state in the pack dir):
// which trunk regions and expert runs are durably written, with their
// checksums. Rewritten atomically after each region and at least every
// second while experts are processed, always after the data it describes
// has been fsync'ed, so a pack killed at any moment resumes without redoing
// finished work and ends byte-identical to an uninterrupted one.
#ifndef FLOTILLA_TOOLS_PACK_STATE_H_
#define FLOTILLA_TOOLS_PACK_STATE_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/pack_plan.h"

namespace flotilla::tools {

struct PackState {
  std::string fingerprint;  // of the source checkpoint
  std::string plan_id;      // PackPlan::Id(): offsets and layouts
  // One entry per planned region / expert; set once durably written.
  std::vector<std::optional<RegionSums>> regions;
  std::vector<std::optional<uint64_t>> experts;

  size_t regions_done() const;
  size_t experts_done() const;
};

std::string PackStateToJson(const PackState& state);
// Errors (DataLoss) name `source` and what is wrong.
absl::StatusOr<PackState> PackStateFromJson(absl::string_view text,
                                            absl::string_view source);

// How a pack into a directory starts: the pack there is already complete
// (same checkpoint, same plan), an unfinished one resumes, or it starts
// fresh. Refuses (FailedPrecondition) a directory holding a pack or pack
// files of another checkpoint, or records it cannot read, unless `force`.
// Notes (e.g. "starting over") go to `log` when not null.
struct PackStart {
  bool complete = false;
  std::optional<PackState> resume;
};
absl::StatusOr<PackStart> InspectPackDir(const std::string& dir,
                                         const PackPlan& plan, bool force,
                                         FILE* log);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_STATE_H_
