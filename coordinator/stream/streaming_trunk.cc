#include "coordinator/stream/streaming_trunk.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "coordinator/families/kimi_k3/region_binding.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {
namespace {

// A K3 layer bound into its region's bytes.
struct K3Layer : BoundRegion {
  LayerWeights weights;
};

const LayerWeights* WeightsOf(const BoundRegion* b) {
  return b == nullptr ? nullptr : &static_cast<const K3Layer*>(b)->weights;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamingTrunk>> StreamingTrunk::Open(
    const pack::PackManifest& manifest, const model::K3Config& config,
    const StreamingTrunkOptions& options) {
  auto t = std::unique_ptr<StreamingTrunk>(new StreamingTrunk());
  t->config_ = config;
  t->options_ = options;
  RegionBinder bind = BinderOf<K3Layer>(
      [config](int layer, const pack::RegionLayout& layout, const uint8_t* data,
               K3Layer* bound) -> absl::Status {
        FLOTILLA_ASSIGN_OR_RETURN(bound->weights,
                                  BindLayer(layout, data, config, layer));
        return absl::OkStatus();
      });
  FLOTILLA_ASSIGN_OR_RETURN(t->ring_,
                            RegionRing::Open(manifest, config.num_hidden_layers,
                                             std::move(bind), options.ring));
  const pack::PackManifest& m = t->ring_->manifest();

  // Model-level vectors: always resident (a few KB).
  const pack::PackRegion* g = m.FindRegion("globals");
  const pack::PackRegion* embed_region = m.FindRegion("embed");
  const pack::PackRegion* lm_head_region = m.FindRegion("lm_head");
  if (g == nullptr || embed_region == nullptr || lm_head_region == nullptr) {
    return absl::DataLossError(
        "pack manifest lacks the globals, embed or lm_head region");
  }
  FLOTILLA_ASSIGN_OR_RETURN(t->globals_buf_,
                            io::AlignedBuffer::Allocate(g->size, true));
  FLOTILLA_RETURN_IF_ERROR(t->ring_->ReadRegion(*g, t->globals_buf_.data()));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->globals_, BindGlobals(g->layout, t->globals_buf_.data(), config));

  // Vocab regions: pinned, or read piecewise with chunk checksums.
  for (const pack::PackRegion* r : {embed_region, lm_head_region}) {
    const pack::RegionLayout& layout = r->layout;
    const pack::RegionField* f = layout.Find("matrix");
    if (f == nullptr || f->shape.size() != 2 ||
        f->shape[0] != config.vocab_size || f->shape[1] != config.hidden_size) {
      return absl::DataLossError(absl::StrCat(
          "pack region ", r->kind, " does not hold a [vocab][hidden] matrix"));
    }
    const bool embed = r == embed_region;
    const bool pinned = embed ? options.embed_pinned : options.lm_head_pinned;
    if (!pinned) {
      VocabStreamOptions vo;
      vo.lm_head_pass_bytes = options.lm_head_chunk_bytes;
      vo.verify_checksums = options.ring.verify_checksums;
      vo.reader = options.ring.reader;
      vo.reader_factory = options.ring.reader_factory;
      FLOTILLA_ASSIGN_OR_RETURN(
          (embed ? t->embed_stream_ : t->lm_head_stream_),
          VocabStream::Create(
              t->ring_->file(), r, f->offset,
              f->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                              : kernels::DenseType::kF32,
              config.vocab_size, config.hidden_size,
              embed ? VocabStream::Use::kEmbedRows : VocabStream::Use::kLmHead,
              vo));
      continue;
    }
    io::AlignedBuffer& buf = embed ? t->embed_buf_ : t->lm_head_buf_;
    FLOTILLA_ASSIGN_OR_RETURN(buf, io::AlignedBuffer::Allocate(r->size, true));
    FLOTILLA_RETURN_IF_ERROR(t->ring_->ReadRegion(*r, buf.data()));
    FLOTILLA_ASSIGN_OR_RETURN(Matrix mat,
                              BindVocab(layout, buf.data(), config));
    (embed ? t->embed_ : t->lm_head_) = mat;
  }

  // The pinned prefix and the ring over the rest.
  // Its counters start at zero (RegionRing::Start), as do the vocabulary
  // streams', which have read nothing yet.
  FLOTILLA_RETURN_IF_ERROR(t->ring_->Start());
  return t;
}

StreamingTrunk::~StreamingTrunk() = default;

absl::Status StreamingTrunk::BeginStep() { return ring_->BeginStep(); }

absl::StatusOr<const LayerWeights*> StreamingTrunk::AcquireLayer(int layer) {
  FLOTILLA_ASSIGN_OR_RETURN(const BoundRegion* b, ring_->Acquire(layer));
  return WeightsOf(b);
}

void StreamingTrunk::ReleaseLayer(int layer) { ring_->Release(layer); }

const LayerWeights* StreamingTrunk::PeekLayer(int layer) {
  return WeightsOf(ring_->Peek(layer));
}

absl::Status StreamingTrunk::EmbedRows(const std::vector<int32_t>& ids,
                                       float* out) {
  if (!options_.embed_pinned) return embed_stream_->EmbedRows(ids, out);
  const size_t e = config_.hidden_size;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[t], " outside the embedding"));
    }
    embed_.RowF32(ids[t], out + t * e);
  }
  return absl::OkStatus();
}

absl::Status StreamingTrunk::LmHead(const float* x, size_t rows, float* logits,
                                    kernels::ThreadPool* pool) {
  if (options_.lm_head_pinned) {
    kernels::MatMul(lm_head_.view(), x, rows, logits, pool);
    return absl::OkStatus();
  }
  return lm_head_stream_->LmHead(x, rows, logits, pool);
}

TrunkStats StreamingTrunk::stats() const {
  TrunkStats s = ring_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  if (embed_stream_ != nullptr) {
    s.embedding_bytes_read =
        embed_stream_->bytes_read() - embed_bytes_at_reset_;
  }
  if (lm_head_stream_ != nullptr) {
    s.lm_head_bytes_read =
        lm_head_stream_->bytes_read() - lm_head_bytes_at_reset_;
  }
  s.bytes_read += s.embedding_bytes_read + s.lm_head_bytes_read;
  return s;
}

void StreamingTrunk::ResetStats() {
  ring_->ResetStats();
  std::lock_guard<std::mutex> lock(mu_);
  if (embed_stream_ != nullptr) {
    embed_bytes_at_reset_ = embed_stream_->bytes_read();
  }
  if (lm_head_stream_ != nullptr) {
    lm_head_bytes_at_reset_ = lm_head_stream_->bytes_read();
  }
}

}  // namespace flotilla::coordinator
