#include "shared/pack/region_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/io/aligned_buffer.h"

namespace flotilla::pack {
namespace {

using model::DType;
using model::TensorInfo;
using model::TensorSource;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string ShapeStr(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

// Checks a source tensor and returns the dtype its field will have.
absl::StatusOr<DType> SourceDType(const TensorSource& source,
                                  const FieldSpec& f,
                                  const std::vector<FieldSpec>& schema) {
  if (f.kind == FieldKind::kUkT) {
    for (const FieldSpec& other : schema) {
      if (other.field == f.src) {
        return SourceDType(source, other, schema);
      }
    }
    return absl::InternalError(absl::StrCat("uk_t without ", f.src));
  }
  if (f.kind == FieldKind::kFp8Matrix) {
    const TensorInfo* t = source.Find(f.src);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat("missing tensor ", f.src));
    }
    if (t->shape != FieldShape(f) || t->dtype != DType::kF8E4M3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", f.src, " in ", t->file, " is ", model::DTypeName(t->dtype),
          " ", ShapeStr(t->shape), ", expected F8_E4M3 ",
          ShapeStr(FieldShape(f)), " (the config's quantization_config)"));
    }
    return DType::kF8E4M3;
  }
  for (const std::string& name : {f.src, f.src2}) {
    if (name.empty()) continue;
    const TensorInfo* t = source.Find(name);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat("missing tensor ", name));
    }
    if (f.kind == FieldKind::kMatrix) {
      const std::vector<int64_t> want = FieldShape(f);
      if (t->shape != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", name, " in ", t->file, " has shape ",
                         ShapeStr(t->shape), ", expected ", ShapeStr(want)));
      }
      if (t->dtype == DType::kBF16) return DType::kBF16;
      if (t->dtype == DType::kF32 || t->dtype == DType::kF16) {
        return DType::kF32;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, " in ", t->file, " has dtype ",
          model::DTypeName(t->dtype), ", expected BF16, F16 or F32"));
    }
    // Vectors are 1-D with the exact length ([64,2] is not a [128]); the
    // second factor of a fold (an AttnRes projection) is a [1, n] matrix.
    const int64_t n = static_cast<int64_t>(f.rows);
    const bool fold_proj = f.kind == FieldKind::kFold && name == f.src2;
    bool ok;
    if (f.kind == FieldKind::kVectorPrefix) {
      ok = t->shape.size() == 1 && t->shape[0] >= n;
    } else if (fold_proj) {
      ok = t->shape == std::vector<int64_t>{n} ||
           t->shape == std::vector<int64_t>{1, n};
    } else {
      ok = t->shape ==
           (f.src_shape.empty() ? std::vector<int64_t>{n} : f.src_shape);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, " in ", t->file, " has shape ", ShapeStr(t->shape),
          ", expected ",
          f.kind == FieldKind::kVectorPrefix
              ? absl::StrCat("[at least ", n, "]")
          : !f.src_shape.empty()
              ? ShapeStr(f.src_shape)
              : absl::StrCat("[", n, "]", fold_proj ? " or [1," : "",
                             fold_proj ? absl::StrCat(n, "]") : "")));
    }
    if (t->dtype == DType::kU8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, " in ", t->file, " has dtype U8, expected a float"));
    }
  }
  return DType::kF32;
}

RegionLayout LayoutFor(const std::vector<FieldSpec>& schema,
                       const std::vector<DType>& dtypes) {
  RegionLayout layout;
  uint64_t offset = 0;
  for (size_t i = 0; i < schema.size(); ++i) {
    RegionField f;
    f.name = schema[i].field;
    f.dtype = dtypes[i];
    f.shape = FieldShape(schema[i]);
    f.offset = offset;
    f.nbytes = schema[i].rows * std::max<size_t>(schema[i].cols, 1) *
               model::DTypeSize(dtypes[i]);
    offset = RoundUp(offset + f.nbytes, kFieldAlign);
    layout.fields.push_back(std::move(f));
  }
  layout.size = RoundUp(std::max<uint64_t>(offset, 1), io::kDirectIoAlignment);
  return layout;
}

}  // namespace

std::vector<int64_t> FieldShape(const FieldSpec& f) {
  if (f.kind == FieldKind::kMatrix || f.kind == FieldKind::kUkT ||
      f.kind == FieldKind::kFp8Matrix) {
    return {static_cast<int64_t>(f.rows), static_cast<int64_t>(f.cols)};
  }
  return {static_cast<int64_t>(f.rows)};
}

const RegionField* RegionLayout::Find(absl::string_view name) const {
  for (const RegionField& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<RegionLayout> ResolveLayout(
    const TensorSource& source, const std::vector<FieldSpec>& schema) {
  std::vector<DType> dtypes;
  for (const FieldSpec& f : schema) {
    FLOTILLA_ASSIGN_OR_RETURN(DType d, SourceDType(source, f, schema));
    dtypes.push_back(d);
  }
  return LayoutFor(schema, dtypes);
}

RegionLayout PlannedLayout(const std::vector<FieldSpec>& schema) {
  std::vector<DType> dtypes;
  for (const FieldSpec& f : schema) {
    dtypes.push_back(f.kind == FieldKind::kFp8Matrix ? DType::kF8E4M3
                     : f.kind == FieldKind::kMatrix || f.kind == FieldKind::kUkT
                         ? DType::kBF16
                         : DType::kF32);
  }
  return LayoutFor(schema, dtypes);
}

absl::Status CheckLayout(const RegionLayout& layout,
                         const std::vector<FieldSpec>& schema) {
  for (const FieldSpec& spec : schema) {
    const RegionField* f = layout.Find(spec.field);
    if (f == nullptr) {
      return absl::DataLossError(
          absl::StrCat("trunk region lacks field ", spec.field));
    }
    const bool matrix = spec.kind == FieldKind::kMatrix ||
                        spec.kind == FieldKind::kUkT ||
                        spec.kind == FieldKind::kFp8Matrix;
    const bool dtype_ok =
        spec.kind == FieldKind::kFp8Matrix ? f->dtype == DType::kF8E4M3
        : matrix ? (f->dtype == DType::kF32 || f->dtype == DType::kBF16)
                 : f->dtype == DType::kF32;
    const size_t elems = spec.rows * std::max<size_t>(spec.cols, 1);
    if (!dtype_ok || f->shape != FieldShape(spec) ||
        f->nbytes != elems * model::DTypeSize(f->dtype) ||
        f->offset + f->nbytes > layout.size) {
      return absl::DataLossError(absl::StrCat(
          "trunk region field ", spec.field, " has dtype ",
          model::DTypeName(f->dtype), " shape ", ShapeStr(f->shape),
          ", expected shape ", ShapeStr(FieldShape(spec))));
    }
  }
  return absl::OkStatus();
}

std::string LayoutToJson(const RegionLayout& layout) {
  nlohmann::json j;
  j["size"] = layout.size;
  j["fields"] = nlohmann::json::array();
  for (const RegionField& f : layout.fields) {
    j["fields"].push_back({{"name", f.name},
                           {"dtype", model::DTypeName(f.dtype)},
                           {"shape", f.shape},
                           {"offset", f.offset},
                           {"nbytes", f.nbytes}});
  }
  return j.dump();
}

absl::StatusOr<RegionLayout> LayoutFromJson(absl::string_view text) {
  nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("bad region layout: ", why));
  };
  if (j.is_discarded() || !j.is_object() || !j.contains("size") ||
      !j["size"].is_number_unsigned() || !j.contains("fields") ||
      !j["fields"].is_array()) {
    return bad("needs size and fields");
  }
  RegionLayout layout;
  layout.size = j["size"].get<uint64_t>();
  for (const auto& f : j["fields"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        !f.contains("dtype") || !f["dtype"].is_string() ||
        !f.contains("shape") || !f["shape"].is_array() ||
        !f.contains("offset") || !f["offset"].is_number_unsigned() ||
        !f.contains("nbytes") || !f["nbytes"].is_number_unsigned()) {
      return bad("a field lacks name/dtype/shape/offset/nbytes");
    }
    RegionField field;
    field.name = f["name"].get<std::string>();
    const std::string dtype = f["dtype"].get<std::string>();
    if (dtype == "F32") {
      field.dtype = DType::kF32;
    } else if (dtype == "BF16") {
      field.dtype = DType::kBF16;
    } else if (dtype == "F8_E4M3") {
      field.dtype = DType::kF8E4M3;
    } else {
      return bad(absl::StrCat("field ", field.name, " has dtype ", dtype));
    }
    for (const auto& d : f["shape"]) {
      if (!d.is_number_unsigned()) return bad("non-integer shape");
      field.shape.push_back(d.get<int64_t>());
    }
    field.offset = f["offset"].get<uint64_t>();
    field.nbytes = f["nbytes"].get<uint64_t>();
    if (field.offset > layout.size ||
        field.nbytes > layout.size - field.offset) {
      return bad(absl::StrCat("field ", field.name, " runs past the region"));
    }
    layout.fields.push_back(std::move(field));
  }
  return layout;
}

}  // namespace flotilla::pack
