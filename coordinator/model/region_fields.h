// Reading a bound layer region's fields by name (shared/pack/region_layout.h)
// for a family's RegionBinder: a dense matrix view (BF16 or F32, as the
// region stores it) or a float vector, DataLoss naming the layer and field
// when the region lacks it. Call pack::CheckLayout against the schema first;
// these then only look fields up.
#ifndef FLOTILLA_COORDINATOR_MODEL_REGION_FIELDS_H_
#define FLOTILLA_COORDINATOR_MODEL_REGION_FIELDS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shared/kernels/kernels.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {

struct RegionFields {
  const pack::RegionLayout& layout;
  const uint8_t* base;
  int layer;

  absl::StatusOr<const pack::RegionField*> Field(const char* name) const {
    const pack::RegionField* f = layout.Find(name);
    if (f == nullptr) {
      return absl::DataLossError(
          absl::StrCat("layer ", layer, "'s region has no field ", name));
    }
    return f;
  }

  absl::StatusOr<kernels::DenseMatrix> Matrix(const char* name) const {
    absl::StatusOr<const pack::RegionField*> f = Field(name);
    if (!f.ok()) return f.status();
    kernels::DenseMatrix m;
    m.type = (*f)->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                                : kernels::DenseType::kF32;
    m.data = base + (*f)->offset;
    m.rows = (*f)->shape[0];
    m.cols = (*f)->shape[1];
    return m;
  }

  absl::StatusOr<const float*> Vector(const char* name) const {
    absl::StatusOr<const pack::RegionField*> f = Field(name);
    if (!f.ok()) return f.status();
    return reinterpret_cast<const float*>(base + (*f)->offset);
  }
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_REGION_FIELDS_H_
