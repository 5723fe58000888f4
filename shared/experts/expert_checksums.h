// Per-expert checksums for a folder of experts that has no pack: what
// `flotilla-tool pack --workers` writes into each worker folder, so that a
// worker verifies every expert it reads (DATA_LOSS naming layer, expert,
// file and offset on a mismatch) exactly as with a pack's expert table.
//
// <folder>/expert_checksums.bin uses the expert table's record format
// (shared/pack/expert_table.h): one record per expert of the folder's
// safetensors, with its file index into ExpertIndex::files(), offset,
// length, XXH3-64 of the run and tensor offsets.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_CHECKSUMS_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_CHECKSUMS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/experts/expert_index.h"

namespace flotilla::experts {

inline constexpr char kExpertChecksumsFile[] = "expert_checksums.bin";

// Reads every expert run of `index` once and returns the bytes of its
// expert_checksums.bin (the caller writes them into the folder).
absl::StatusOr<std::string> ComputeExpertChecksums(const ExpertIndex& index);

// When `folder`/expert_checksums.bin exists: checks that it lists exactly
// the experts of `index` at the same places, and sets their checksums.
// Returns whether the file was there. A table that disagrees with the
// index (another cut, a damaged file) is DataLoss naming the record.
absl::StatusOr<bool> ApplyExpertChecksums(const std::string& folder,
                                          ExpertIndex* index);

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_CHECKSUMS_H_
