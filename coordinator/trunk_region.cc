#include "coordinator/trunk_region.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/trunk_schema.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

using model::DType;
using model::TensorInfo;
using model::TensorSource;

constexpr uint64_t kFieldAlign = 64;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string ShapeStr(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

std::vector<int64_t> SpecShape(const FieldSpec& f) {
  if (f.kind == FieldKind::kMatrix || f.kind == FieldKind::kUkT) {
    return {static_cast<int64_t>(f.rows), static_cast<int64_t>(f.cols)};
  }
  return {static_cast<int64_t>(f.rows)};
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
  for (const std::string& name : {f.src, f.src2}) {
    if (name.empty()) continue;
    const TensorInfo* t = source.Find(name);
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat("missing tensor ", name));
    }
    if (f.kind == FieldKind::kMatrix) {
      const std::vector<int64_t> want = SpecShape(f);
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
    const int64_t n = static_cast<int64_t>(f.rows);
    const bool ok =
        f.kind == FieldKind::kVectorPrefix ? t->numel() >= n : t->numel() == n;
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, " in ", t->file, " has shape ", ShapeStr(t->shape),
          " (", t->numel(), " elements), expected ",
          f.kind == FieldKind::kVectorPrefix ? "at least " : "", n));
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
    f.shape = SpecShape(schema[i]);
    f.offset = offset;
    f.nbytes = schema[i].rows * std::max<size_t>(schema[i].cols, 1) *
               model::DTypeSize(dtypes[i]);
    offset = RoundUp(offset + f.nbytes, kFieldAlign);
    layout.fields.push_back(std::move(f));
  }
  layout.size = RoundUp(std::max<uint64_t>(offset, 1), io::kDirectIoAlignment);
  return layout;
}

absl::Status Fill(const TensorSource& source, const FieldSpec& spec,
                  const RegionField& field, const RegionLayout& layout,
                  uint8_t* base) {
  uint8_t* dst = base + field.offset;
  switch (spec.kind) {
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
      std::memcpy(dst, v.data(), spec.rows * sizeof(float));
      return absl::OkStatus();
    }
    case FieldKind::kFold: {
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> a,
                                source.ReadF32(spec.src, spec.rows));
      FLOTILLA_ASSIGN_OR_RETURN(std::vector<float> b,
                                source.ReadF32(spec.src2, spec.rows));
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

absl::StatusOr<Region> Build(const TensorSource& source,
                             const std::vector<FieldSpec>& schema) {
  std::vector<DType> dtypes;
  for (const FieldSpec& f : schema) {
    FLOTILLA_ASSIGN_OR_RETURN(DType d, SourceDType(source, f, schema));
    dtypes.push_back(d);
  }
  Region region;
  region.layout = LayoutFor(schema, dtypes);
  FLOTILLA_ASSIGN_OR_RETURN(
      region.bytes,
      io::AlignedBuffer::Allocate(region.layout.size, /*prefault=*/false));
  // The buffer is a fresh anonymous mapping: padding between fields is
  // already zero, and touching it all here would only pay first-touch twice.
  for (size_t i = 0; i < schema.size(); ++i) {
    FLOTILLA_RETURN_IF_ERROR(Fill(source, schema[i], region.layout.fields[i],
                                  region.layout, region.bytes.data()));
  }
  return region;
}

RegionLayout Plan(const std::vector<FieldSpec>& schema) {
  std::vector<DType> dtypes;
  for (const FieldSpec& f : schema) {
    dtypes.push_back(f.kind == FieldKind::kMatrix || f.kind == FieldKind::kUkT
                         ? DType::kBF16
                         : DType::kF32);
  }
  return LayoutFor(schema, dtypes);
}

// Resolves fields of a region into views, checking them against the schema.
class Binder {
 public:
  Binder(const RegionLayout& layout, const uint8_t* base)
      : layout_(layout), base_(base) {}

  absl::Status Check(const std::vector<FieldSpec>& schema) {
    for (const FieldSpec& spec : schema) {
      const RegionField* f = layout_.Find(spec.field);
      if (f == nullptr) {
        return absl::DataLossError(
            absl::StrCat("trunk region lacks field ", spec.field));
      }
      const bool matrix =
          spec.kind == FieldKind::kMatrix || spec.kind == FieldKind::kUkT;
      const bool dtype_ok =
          matrix ? (f->dtype == DType::kF32 || f->dtype == DType::kBF16)
                 : f->dtype == DType::kF32;
      const size_t elems = spec.rows * std::max<size_t>(spec.cols, 1);
      if (!dtype_ok || f->shape != SpecShape(spec) ||
          f->nbytes != elems * model::DTypeSize(f->dtype) ||
          f->offset + f->nbytes > layout_.size) {
        return absl::DataLossError(absl::StrCat(
            "trunk region field ", spec.field, " has dtype ",
            model::DTypeName(f->dtype), " shape ", ShapeStr(f->shape),
            ", expected shape ", ShapeStr(SpecShape(spec))));
      }
    }
    return absl::OkStatus();
  }

  Matrix M(absl::string_view name) const {
    const RegionField* f = layout_.Find(name);
    Matrix m;
    if (f == nullptr) return m;
    m.type = f->dtype == DType::kBF16 ? kernels::DenseType::kBF16
                                      : kernels::DenseType::kF32;
    m.data = base_ + f->offset;
    m.rows = f->shape[0];
    m.cols = f->shape[1];
    return m;
  }
  Vec V(absl::string_view name) const {
    const RegionField* f = layout_.Find(name);
    if (f == nullptr) return Vec();
    return Vec(reinterpret_cast<const float*>(base_ + f->offset),
               f->nbytes / sizeof(float));
  }

 private:
  const RegionLayout& layout_;
  const uint8_t* base_;
};

}  // namespace

const RegionField* RegionLayout::Find(absl::string_view name) const {
  for (const RegionField& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<Region> BuildLayerRegion(const TensorSource& source,
                                        const model::K3Config& config,
                                        int layer, int parts) {
  return Build(source, LayerSchema(config, layer, parts));
}

absl::StatusOr<Region> BuildGlobalsRegion(const TensorSource& source,
                                          const model::K3Config& config) {
  return Build(source, GlobalsSchema(config));
}

absl::StatusOr<Region> BuildVocabRegion(const TensorSource& source,
                                        const model::K3Config& config,
                                        bool lm_head) {
  return Build(source, VocabSchema(config, lm_head));
}

RegionLayout PlanLayerLayout(const model::K3Config& config, int layer) {
  return Plan(LayerSchema(config, layer, kAllLayerParts));
}

RegionLayout PlanVocabLayout(const model::K3Config& config) {
  return Plan(VocabSchema(config, false));
}

absl::StatusOr<LayerWeights> BindLayer(const RegionLayout& layout,
                                       const uint8_t* base,
                                       const model::K3Config& c, int layer,
                                       int parts) {
  Binder b(layout, base);
  FLOTILLA_RETURN_IF_ERROR(b.Check(LayerSchema(c, layer, parts)));
  LayerWeights w;
  w.is_mla = c.IsMlaLayer(layer);
  w.is_dense = c.IsDenseLayer(layer);
  w.input_norm = b.V("input_layernorm");
  w.post_norm = b.V("post_attention_layernorm");
  w.attn_res_fold = b.V("attn_res_fold");
  w.mlp_res_fold = b.V("mlp_res_fold");
  if (w.is_mla) {
    MlaWeights& m = w.mla;
    m.q_a = b.M("q_a_proj");
    m.q_a_norm = b.V("q_a_layernorm");
    m.q_b = b.M("q_b_proj");
    m.kv_a = b.M("kv_a_proj");
    m.kv_a_norm = b.V("kv_a_layernorm");
    m.kv_b = b.M("kv_b_proj");
    m.uk_t = b.M("uk_t");
    m.o_proj = b.M("o_proj");
    m.g_proj = b.M("g_proj");
  } else {
    KdaWeights& k = w.kda;
    k.q_proj = b.M("q_proj");
    k.k_proj = b.M("k_proj");
    k.v_proj = b.M("v_proj");
    k.g_proj = b.M("g_proj");
    k.o_proj = b.M("o_proj");
    k.f_a = b.M("f_a_proj");
    k.f_b = b.M("f_b_proj");
    k.b_proj = b.M("b_proj");
    k.q_conv = b.V("q_conv");
    k.k_conv = b.V("k_conv");
    k.v_conv = b.V("v_conv");
    k.a_log = b.V("A_log");
    k.dt_bias = b.V("dt_bias");
    k.o_norm = b.V("o_norm");
  }
  if (w.is_dense) {
    w.dense.gate = b.M("mlp.gate");
    w.dense.up = b.M("mlp.up");
    w.dense.down = b.M("mlp.down");
  } else {
    MoeWeights& m = w.moe;
    m.router = b.M("router");
    m.bias = b.V("router_bias");
    m.down = b.M("latent_down");
    m.up = b.M("latent_up");
    m.latent_norm = b.V("latent_norm");
    m.shared_gate = b.M("shared_gate");
    m.shared_up = b.M("shared_up");
    m.shared_down = b.M("shared_down");
  }
  return w;
}

absl::StatusOr<GlobalWeights> BindGlobals(const RegionLayout& layout,
                                          const uint8_t* base,
                                          const model::K3Config& c) {
  Binder b(layout, base);
  FLOTILLA_RETURN_IF_ERROR(b.Check(GlobalsSchema(c)));
  GlobalWeights g;
  g.final_norm = b.V("final_norm");
  g.out_res_fold = b.V("out_res_fold");
  return g;
}

absl::StatusOr<Matrix> BindVocab(const RegionLayout& layout,
                                 const uint8_t* base,
                                 const model::K3Config& c) {
  Binder b(layout, base);
  FLOTILLA_RETURN_IF_ERROR(b.Check(VocabSchema(c, false)));
  return b.M("matrix");
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

}  // namespace flotilla::coordinator
