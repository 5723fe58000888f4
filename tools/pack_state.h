// The progress record of an unfinished pack (pack.state in the pack dir):
// which trunk regions and expert runs are durably written, with their
// checksums. Rewritten atomically after each region and at least every
// second while experts are processed, always after the data it describes
// has been fsync'ed, so a pack killed at any moment resumes without redoing
// finished work and ends byte-identical to an uninterrupted one.
#ifndef FLOTILLA_TOOLS_PACK_STATE_H_
#define FLOTILLA_TOOLS_PACK_STATE_H_

#include <cstdint>
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

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_PACK_STATE_H_
