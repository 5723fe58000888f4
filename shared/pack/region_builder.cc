#include "shared/pack/region_builder.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/kernels/fp8.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::pack {
namespace {

using model::DType;
using model::TensorInfo;
using model::TensorSource;

// Norm weights, biases and router corrections are small and steer every
// token (a NaN in a router bias silently changes which experts run): each
// value must be finite.
absl::Status CheckFinite(const std::string& tensor, const float* v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", tensor, ": element ", i, " is ", v[i],
          " (norms, biases and router corrections must be finite)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Fill(const TensorSource& source, const FieldSpec& spec,
                  const RegionField& field, const RegionLayout& layout,
                  uint8_t* base) {
  uint8_t* dst = base + field.offset;
  switch (spec.kind) {
    case FieldKind::kFp8Matrix:
      return source.ReadRaw(*source.Find(spec.src), dst);
    case FieldKind::kMatrix: {
      const TensorInfo* t = source.Find(spec.src);
      if (t->dtype == field.dtype) return source.ReadRaw(*t, dst);
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> v,
                                source.ReadF32(spec.src, t->numel()));
      std::memcpy(dst, v.data(), v.size() * sizeof(float));
      return absl::OkStatus();
    }
    case FieldKind::kVector:
    case FieldKind::kVectorPrefix: {
      const TensorInfo* t = source.Find(spec.src);
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> v,
                                source.ReadF32(spec.src, t->numel()));
      FLOTILLA_RETURN_IF_ERROR(CheckFinite(spec.src, v.data(), spec.rows));
      std::memcpy(dst, v.data(), spec.rows * sizeof(float));
      return absl::OkStatus();
    }
    case FieldKind::kFold: {
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> a,
                                source.ReadF32(spec.src, spec.rows));
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> b,
                                source.ReadF32(spec.src2, spec.rows));
      FLOTILLA_RETURN_IF_ERROR(CheckFinite(spec.src, a.data(), spec.rows));
      FLOTILLA_RETURN_IF_ERROR(CheckFinite(spec.src2, b.data(), spec.rows));
      float* out = reinterpret_cast<float*>(dst);
      for (size_t i = 0; i < spec.rows; ++i) out[i] = a[i] * b[i];
      return absl::OkStatus();
    }
    case FieldKind::kUkT:
      break;
  }
  // uk_t: W_UK_h^T for each head, from kv_b [Hm*(nope+v)][kv_lora].
  const RegionField* kvb = layout.Find(spec.src);
  const size_t lora = kvb->shape[1], nope = spec.cols, heads = spec.rows / lora,
               per_head = static_cast<size_t>(kvb->shape[0]) / heads;
  const size_t esize = model::DTypeSize(field.dtype);
  const uint8_t* src = base + kvb->offset;
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < nope; ++i) {
      for (size_t j = 0; j < lora; ++j) {
        std::memcpy(dst + ((h * lora + j) * nope + i) * esize,
                    src + ((h * per_head + i) * lora + j) * esize, esize);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Region> BuildRegion(const TensorSource& source,
                                   const std::vector<FieldSpec>& schema) {
  Region region;
  FLOTILLA_ASSIGN_OR_RETURN(region.layout, ResolveLayout(source, schema));
  FLOTILLA_ASSIGN_OR_RETURN(
      region.bytes,
      io::AlignedBuffer::Allocate(region.layout.size, /*prefault=*/false));
  // The buffer is a fresh anonymous mapping: padding between fields is
  // already zero, and touching it all here would only pay first-touch twice.
  for (size_t i = 0; i < schema.size(); ++i) {
    FLOTILLA_RETURN_IF_ERROR(Fill(source, schema[i], region.layout.fields[i],
                                  region.layout, region.bytes.data()));
  }
  // FP8 matrices against their scales, once, here: the kernels assume what
  // CheckFp8Matrix checks, and a pack's checksums keep it true after.
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].kind != FieldKind::kFp8Matrix) continue;
    const RegionField& f = region.layout.fields[i];
    const RegionField* scale = region.layout.Find(schema[i].src2);
    const size_t blocks =
        ((f.shape[0] + 127) / 128) * ((f.shape[1] + 127) / 128);
    if (scale == nullptr || scale->nbytes != blocks * sizeof(float)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", schema[i].src, ": its block scales (",
                       schema[i].src2, ") are not ", blocks, " floats"));
    }
    kernels::Fp8BlockMatrix m;
    m.codes = region.bytes.data() + f.offset;
    m.scale_inv =
        reinterpret_cast<const float*>(region.bytes.data() + scale->offset);
    m.rows = f.shape[0];
    m.cols = f.shape[1];
    FLOTILLA_RETURN_IF_ERROR(base::WithContext(
        kernels::CheckFp8Matrix(m), absl::StrCat("tensor ", schema[i].src)));
  }
  return region;
}

}  // namespace flotilla::pack
