#include "coordinator/families/mixtral/mixtral_trunk.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"
#include "shared/pack/mixtral_schema.h"
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
      pack::CheckLayout(l, pack::MixtralLayerSchema(c, layer)));
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

absl::Status Verify(const pack::PackRegion& r, const uint8_t* data,
                    const std::string& file) {
  const uint64_t got = io::Checksum64(data, r.size);
  if (got != r.checksum) {
    return absl::DataLossError(absl::StrCat(
        "checksum mismatch in ", r.kind,
        r.layer >= 0 ? absl::StrCat(" ", r.layer) : "", " of ", file,
        " at offset ", r.offset, " (", r.size,
        " bytes): the pack is damaged; re-run flotilla-tool pack"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MixtralTrunk>> MixtralTrunk::InMemory(
    const model::TensorSource& source, const model::MixtralConfig& c) {
  auto t = std::unique_ptr<MixtralTrunk>(new MixtralTrunk());
  t->config_ = c;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r,
        pack::BuildRegion(source, pack::MixtralLayerSchema(c, layer)));
    t->regions_.push_back(std::move(r));
  }
  for (auto schema :
       {pack::MixtralGlobalsSchema(c), pack::MixtralVocabSchema(c, false)}) {
    FLOTILLA_ASSIGN_OR_RETURN(pack::Region r,
                              pack::BuildRegion(source, schema));
    t->regions_.push_back(std::move(r));
  }
  if (!c.tie_word_embeddings) {
    FLOTILLA_ASSIGN_OR_RETURN(
        pack::Region r,
        pack::BuildRegion(source, pack::MixtralVocabSchema(c, true)));
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
  t->pinned_ = c.num_hidden_layers;
  return t;
}

uint64_t MixtralTrunk::PackResidentBytes(const pack::PackManifest& m,
                                         int pinned_layers) {
  uint64_t bytes = 0, largest_layer = 0;
  bool streams = false;
  for (const pack::PackRegion& r : m.regions) {
    if (r.kind != "layer") {
      bytes += r.size;
    } else if (r.layer < pinned_layers) {
      bytes += r.size;
    } else {
      streams = true;
      largest_layer = std::max(largest_layer, r.size);
    }
  }
  return bytes + (streams ? largest_layer : 0);
}

absl::StatusOr<std::unique_ptr<MixtralTrunk>> MixtralTrunk::FromPack(
    const pack::PackManifest& manifest, const std::string& pack_dir,
    const model::MixtralConfig& c, int pinned_layers) {
  auto t = std::unique_ptr<MixtralTrunk>(new MixtralTrunk());
  t->config_ = c;
  t->manifest_ = manifest;
  t->pinned_ = std::clamp(pinned_layers, 0, c.num_hidden_layers);
  const std::string path = pack_dir + "/" + manifest.trunk_file;
  FLOTILLA_ASSIGN_OR_RETURN(t->file_, io::File::Open(path, /*direct=*/true));
  const pack::PackManifest& m = t->manifest_;
  auto load =
      [&](const pack::PackRegion& r) -> absl::StatusOr<io::AlignedBuffer> {
    FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer b,
                              io::AlignedBuffer::Allocate(r.size, false));
    FLOTILLA_RETURN_IF_ERROR(t->file_.ReadAt(r.offset, r.size, b.data()));
    FLOTILLA_RETURN_IF_ERROR(Verify(r, b.data(), path));
    t->resident_bytes_ += r.size;
    return b;
  };
  uint64_t largest = 0;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const pack::PackRegion* r = m.FindLayer(layer);
    if (r == nullptr) {
      return absl::DataLossError(absl::StrCat(
          pack_dir, "/manifest.json has no region for layer ", layer));
    }
    t->layer_regions_.push_back(r);
    largest = std::max(largest, r->size);
  }
  t->views_.resize(c.num_hidden_layers);
  for (int layer = 0; layer < t->pinned_; ++layer) {
    const pack::PackRegion& r = *t->layer_regions_[layer];
    FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer b, load(r));
    FLOTILLA_ASSIGN_OR_RETURN(t->views_[layer],
                              BindLayer(r.layout, b.data(), c, layer));
    t->pinned_buffers_.push_back(std::move(b));
  }
  const pack::PackRegion* g = m.FindRegion("globals");
  const pack::PackRegion* embed = m.FindRegion("embed");
  const pack::PackRegion* head = m.FindRegion("lm_head");
  if (g == nullptr || embed == nullptr || head == nullptr) {
    return absl::DataLossError(absl::StrCat(
        pack_dir, "/manifest.json lacks the globals, embed or lm_head region"));
  }
  for (const pack::PackRegion* r : {g, embed, head}) {
    FLOTILLA_ASSIGN_OR_RETURN(io::AlignedBuffer b, load(*r));
    t->pinned_buffers_.push_back(std::move(b));
  }
  const size_t n = t->pinned_buffers_.size();
  FLOTILLA_ASSIGN_OR_RETURN(t->final_norm_,
                            Vector(g->layout, t->pinned_buffers_[n - 3].data(),
                                   "final_norm", "globals"));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->embed_, Matrix(embed->layout, t->pinned_buffers_[n - 2].data(),
                        "matrix", "embed"));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->lm_head_, Matrix(head->layout, t->pinned_buffers_[n - 1].data(),
                          "matrix", "lm_head"));
  if (t->pinned_ < c.num_hidden_layers) {
    FLOTILLA_ASSIGN_OR_RETURN(t->stream_buffer_,
                              io::AlignedBuffer::Allocate(largest, true));
    t->resident_bytes_ += largest;
  }
  return t;
}

absl::StatusOr<const MixtralLayerView*> MixtralTrunk::AcquireLayer(int layer) {
  if (layer < 0 || layer >= config_.num_hidden_layers) {
    return absl::OutOfRangeError(absl::StrCat("no layer ", layer));
  }
  if (layer < pinned_) return &views_[layer];
  const pack::PackRegion& r = *layer_regions_[layer];
  FLOTILLA_RETURN_IF_ERROR(
      file_.ReadAt(r.offset, r.size, stream_buffer_.data()));
  FLOTILLA_RETURN_IF_ERROR(
      Verify(r, stream_buffer_.data(), "the pack's trunk file"));
  FLOTILLA_ASSIGN_OR_RETURN(
      streamed_, BindLayer(r.layout, stream_buffer_.data(), config_, layer));
  stats_.bytes_read += r.size;
  ++stats_.layers_read;
  return &streamed_;
}

}  // namespace flotilla::coordinator
