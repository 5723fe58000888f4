// Builds trunk regions (region_layout.h) from a checkpoint. The same
// builder serves the in-memory path (regions built in RAM from a
// checkpoint) and `flotilla-tool pack` (regions written to the trunk file
// and later streamed back into ring slots), so every path computes on
// identical bytes and the outputs are bitwise identical whatever the memory
// budget.
#ifndef FLOTILLA_SHARED_PACK_REGION_BUILDER_H_
#define FLOTILLA_SHARED_PACK_REGION_BUILDER_H_

#include "absl/status/statusor.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/region_layout.h"

namespace flotilla::pack {

// The region of any schema (each family's, shared/family). Errors name the
// tensor and its file.
absl::StatusOr<Region> BuildRegion(const model::TensorSource& source,
                                   const std::vector<FieldSpec>& schema);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_REGION_BUILDER_H_
