#include "coordinator/families/mixtral/mixtral_trunk.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/family/mixtral/mixtral_schema.h"
#include "shared/pack/region_builder.h"

namespace flotilla::coordinator {
namespace {

absl::StatusOr<const pack::RegionField*> Field(const pack::RegionLayout& l,
                                               const char* name,
                                               const std::string& region) {
  const pack::RegionField* f = l.Find(name);
  if (f == nullptr) {
    return absl::DataLossError(
        absl::StrCat("region ", region, " has no field ", name));
  }
  return f;
}

absl::StatusOr<kernels::DenseMatrix> Matrix(const pack::RegionLayout& l,
                                            const uint8_t* base,
                                            const char* name,
                                            const std::string& region) {
  FLOTILLA_ASSIGN_OR_RETURN(const pack::RegionField* f, Field(l, name, region));
  if (f->shape.size() != 2) {
    return absl::DataLossError(
        absl::StrCat("region ", region, " field ", name, " is not a matrix"));
  }
  kernels::DenseMatrix m;
  m.type = f->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                           : kernels::DenseType::kF32;
  m.data = base + f->offset;
  m.rows = f->shape[0];
  m.cols = f->shape[1];
  return m;
}

absl::StatusOr<const float*> Vector(const pack::RegionLayout& l,
                                    const uint8_t* base, const char* name,
                                    const std::string& region) {
  FLOTILLA_ASSIGN_OR_RETURN(const pack::RegionField* f, Field(l, name, region));
  return reinterpret_cast<const float*>(base + f->offset);
}

// Views into a layer region, after checking it has the schema's fields.
absl::StatusOr<MixtralLayerView> BindLayer(const pack::RegionLayout& l,
                                           const uint8_t* base,
                                           const model::MixtralConfig& c,
                                           int layer) {
  const std::string name = absl::StrCat("layer ", layer);
  FLOTILLA_RETURN_IF_ERROR(
      pack::CheckLayout(l, family::mixtral::LayerSchema(c, layer)));
  MixtralLayerView v;
  FLOTILLA_ASSIGN_OR_RETURN(v.input_norm, Vector(l, base, "input_norm", name));
  FLOTILLA_ASSIGN_OR_RETURN(v.post_norm, Vector(l, base, "post_norm", name));
  FLOTILLA_ASSIGN_OR_RETURN(v.q, Matrix(l, base, "q_proj", name));
  FLOTILLA_ASSIGN_OR_RETURN(v.k, Matrix(l, base, "k_proj", name));
  FLOTILLA_ASSIGN_OR_RETURN(v.v, Matrix(l, base, "v_proj", name));
  FLOTILLA_ASSIGN_OR_RETURN(v.o, Matrix(l, base, "o_proj", name));
  FLOTILLA_ASSIGN_OR_RETURN(v.router, Matrix(l, base, "router", name));
  return v;
}

// A layer bound into its region's bytes.
struct MixtralLayer : BoundRegion {
  MixtralLayerView view;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MixtralTrunk>> MixtralTrunk::InMemory(
    const model::TensorSource& source, const model::MixtralConfig& c) {
  auto t = std::unique_ptr<MixtralTrunk>(new MixtralTrunk());
  t->config_ = c;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r,
        pack::BuildRegion(source, family::mixtral::LayerSchema(c, layer)));
    t->regions_.push_back(std::move(r));
  }
  for (auto schema : {family::mixtral::GlobalsSchema(c),
                      family::mixtral::VocabSchema(c, false)}) {
    FLOTILLA_ASSIGN_OR_RETURN(pack::Region r,
                              pack::BuildRegion(source, schema));
    t->regions_.push_back(std::move(r));
  }
  if (!c.tie_word_embeddings) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r,
        pack::BuildRegion(source, family::mixtral::VocabSchema(c, true)));
    t->regions_.push_back(std::move(r));
  }
  // Bind once every region has its final address.
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const pack::Region& r = t->regions_[layer];
    FLOTILLA_ASSIGN_OR_RETURN(MixtralLayerView v,
                              BindLayer(r.layout, r.bytes.data(), c, layer));
    t->views_.push_back(v);
  }
  const pack::Region& g = t->regions_[c.num_hidden_layers];
  const pack::Region& embed = t->regions_[c.num_hidden_layers + 1];
  const pack::Region& head = t->regions_.back();
  FLOTILLA_ASSIGN_OR_RETURN(t->final_norm_, Vector(g.layout, g.bytes.data(),
                                                   "final_norm", "globals"));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->embed_, Matrix(embed.layout, embed.bytes.data(), "matrix", "embed"));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->lm_head_, Matrix(head.layout, head.bytes.data(), "matrix", "lm_head"));
  for (const pack::Region& r : t->regions_) t->resident_bytes_ += r.layout.size;
  return t;
}

RegionBinder MixtralTrunk::LayerBinder(const model::MixtralConfig& config) {
  return BinderOf<MixtralLayer>(
      [config](int layer, const pack::RegionLayout& layout, const uint8_t* data,
               MixtralLayer* bound) -> absl::Status {
        FLOTILLA_ASSIGN_OR_RETURN(bound->view,
                                  BindLayer(layout, data, config, layer));
        return absl::OkStatus();
      });
}

absl::StatusOr<std::unique_ptr<MixtralTrunk>> MixtralTrunk::FromLayers(
    std::unique_ptr<LayerSource> layers, const model::MixtralConfig& c) {
  auto t = std::unique_ptr<MixtralTrunk>(new MixtralTrunk());
  t->config_ = c;
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
  FLOTILLA_ASSIGN_OR_RETURN(
      t->final_norm_,
      Vector(g->layout, t->resident_[0].data(), "final_norm", "globals"));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->embed_,
      Matrix(embed->layout, t->resident_[1].data(), "matrix", "embed"));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->lm_head_,
      Matrix(head->layout, t->resident_[2].data(), "matrix", "lm_head"));
  FLOTILLA_RETURN_IF_ERROR(t->layers_->Start());
  return t;
}

absl::Status MixtralTrunk::BeginStep() {
  return layers_ != nullptr ? layers_->BeginStep() : absl::OkStatus();
}

absl::StatusOr<const MixtralLayerView*> MixtralTrunk::AcquireLayer(int layer) {
  if (layer < 0 || layer >= config_.num_hidden_layers) {
    return absl::OutOfRangeError(absl::StrCat("no layer ", layer));
  }
  if (layers_ == nullptr) return &views_[layer];
  FLOTILLA_ASSIGN_OR_RETURN(const BoundRegion* b, layers_->Acquire(layer));
  return &static_cast<const MixtralLayer*>(b)->view;
}

void MixtralTrunk::ReleaseLayer(int layer) {
  if (layers_ != nullptr) layers_->Release(layer);
}

uint64_t MixtralTrunk::resident_bytes() const {
  return resident_bytes_ + (layers_ != nullptr ? layers_->resident_bytes() : 0);
}

int MixtralTrunk::pinned_layers() const {
  return layers_ != nullptr ? layers_->pinned_layers()
                            : config_.num_hidden_layers;
}

TrunkStats MixtralTrunk::stats() const {
  return layers_ != nullptr ? layers_->stats() : TrunkStats();
}

}  // namespace flotilla::coordinator
