#include "coordinator/model/region_trunk.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/pack/region_builder.h"

namespace flotilla::coordinator {
namespace {

absl::StatusOr<const pack::RegionField*> Field(const pack::RegionLayout& l,
                                               const char* name,
                                               const char* region,
                                               size_t dims) {
  const pack::RegionField* f = l.Find(name);
  if (f == nullptr || f->shape.size() != dims) {
    return absl::DataLossError(
        absl::StrCat("region ", region,
                     f == nullptr ? " has no field " : " has a bad ", name));
  }
  return f;
}

absl::StatusOr<kernels::DenseMatrix> Matrix(const pack::RegionLayout& l,
                                            const uint8_t* base,
                                            const char* region) {
  FLOTILLA_ASSIGN_OR_RETURN(const pack::RegionField* f,
                            Field(l, "matrix", region, 2));
  if (f->dtype != model::DType::kBF16 && f->dtype != model::DType::kF32) {
    return absl::DataLossError(
        absl::StrCat("region ", region, " holds a matrix of dtype ",
                     model::DTypeName(f->dtype), ", expected BF16 or F32"));
  }
  kernels::DenseMatrix m;
  m.type = f->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                           : kernels::DenseType::kF32;
  m.data = base + f->offset;
  m.rows = f->shape[0];
  m.cols = f->shape[1];
  return m;
}

}  // namespace

absl::Status RegionTrunk::BindModelLevel(const pack::RegionLayout& globals,
                                         const uint8_t* globals_data,
                                         const pack::RegionLayout& embed,
                                         const uint8_t* embed_data,
                                         const pack::RegionLayout& head,
                                         const uint8_t* head_data) {
  FLOTILLA_ASSIGN_OR_RETURN(const pack::RegionField* norm,
                            Field(globals, "final_norm", "globals", 1));
  final_norm_ = reinterpret_cast<const float*>(globals_data + norm->offset);
  FLOTILLA_ASSIGN_OR_RETURN(embed_, Matrix(embed, embed_data, "embed"));
  FLOTILLA_ASSIGN_OR_RETURN(lm_head_, Matrix(head, head_data, "lm_head"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RegionTrunk>> RegionTrunk::InMemory(
    const model::TensorSource& source, const family::FamilyConfig& config,
    const RegionBinder& binder) {
  auto t = std::unique_ptr<RegionTrunk>(new RegionTrunk());
  t->num_layers_ = config.num_layers();
  for (int layer = 0; layer < t->num_layers_; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r, pack::BuildRegion(source, config.LayerSchema(layer)));
    t->regions_.push_back(std::move(r));
  }
  // The lm_head region is the embedding's when the schema reads the same
  // tensor for both (tied embeddings).
  const std::vector<pack::FieldSpec> embed = config.VocabSchema(false);
  const std::vector<pack::FieldSpec> head = config.VocabSchema(true);
  const bool tied =
      head.size() == 1 && embed.size() == 1 && head[0].src == embed[0].src;
  const std::vector<pack::FieldSpec>* model_level[] = {nullptr, &embed,
                                                       tied ? nullptr : &head};
  const std::vector<pack::FieldSpec> globals = config.GlobalsSchema();
  model_level[0] = &globals;
  for (const std::vector<pack::FieldSpec>* schema : model_level) {
    if (schema == nullptr) continue;
    FLOTILLA_ASSIGN_OR_RETURN(pack::Region r,
                              pack::BuildRegion(source, *schema));
    t->regions_.push_back(std::move(r));
  }
  for (int layer = 0; layer < t->num_layers_; ++layer) {
    const pack::Region& r = t->regions_[layer];
    FLOTILLA_ASSIGN_OR_RETURN(std::unique_ptr<BoundRegion> b,
                              binder(layer, r.layout, r.bytes.data()));
    t->bound_.push_back(std::move(b));
  }
  const pack::Region& g = t->regions_[t->num_layers_];
  const pack::Region& e = t->regions_[t->num_layers_ + 1];
  const pack::Region& h = t->regions_.back();
  FLOTILLA_RETURN_IF_ERROR(t->BindModelLevel(g.layout, g.bytes.data(), e.layout,
                                             e.bytes.data(), h.layout,
                                             h.bytes.data()));
  for (const pack::Region& r : t->regions_) t->resident_bytes_ += r.layout.size;
  return t;
}

absl::StatusOr<std::unique_ptr<RegionTrunk>> RegionTrunk::FromLayers(
    std::unique_ptr<LayerSource> layers, int num_layers) {
  auto t = std::unique_ptr<RegionTrunk>(new RegionTrunk());
  t->num_layers_ = num_layers;
  t->layers_ = std::move(layers);
  const pack::PackManifest& m = t->layers_->manifest();
  const pack::PackRegion* g = m.FindRegion("globals");
  const pack::PackRegion* embed = m.FindRegion("embed");
  const pack::PackRegion* head = m.FindRegion("lm_head");
  if (g == nullptr || embed == nullptr || head == nullptr) {
    return absl::DataLossError(
        "the pack's manifest lacks the globals, embed or lm_head region");
  }
  for (const pack::PackRegion* r : {g, embed, head}) {
    FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer b,
                              io::AlignedBuffer::Allocate(r->size, true));
    FLOTILLA_RETURN_IF_ERROR(t->layers_->ReadRegion(*r, b.data()));
    t->resident_bytes_ += r->size;
    t->resident_.push_back(std::move(b));
  }
  FLOTILLA_RETURN_IF_ERROR(t->BindModelLevel(
      g->layout, t->resident_[0].data(), embed->layout, t->resident_[1].data(),
      head->layout, t->resident_[2].data()));
  FLOTILLA_RETURN_IF_ERROR(t->layers_->Start());
  return t;
}

absl::Status RegionTrunk::BeginStep() {
  return layers_ != nullptr ? layers_->BeginStep() : absl::OkStatus();
}

absl::StatusOr<const BoundRegion*> RegionTrunk::Acquire(int layer) {
  if (layer < 0 || layer >= num_layers_) {
    return absl::OutOfRangeError(absl::StrCat("no layer ", layer));
  }
  if (layers_ == nullptr) return bound_[layer].get();
  return layers_->Acquire(layer);
}

void RegionTrunk::Release(int layer) {
  if (layers_ != nullptr) layers_->Release(layer);
}

uint64_t RegionTrunk::resident_bytes() const {
  return resident_bytes_ + (layers_ != nullptr ? layers_->resident_bytes() : 0);
}

int RegionTrunk::pinned_layers() const {
  return layers_ != nullptr ? layers_->pinned_layers() : num_layers_;
}

TrunkStats RegionTrunk::stats() const {
  return layers_ != nullptr ? layers_->stats() : TrunkStats();
}

}  // namespace flotilla::coordinator
