#include "coordinator/stream/streaming_trunk.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "coordinator/model/region_binding.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"

namespace flotilla::coordinator {
std::string StreamingTrunk::RegionName(const pack::PackRegion& r) {
  return r.kind == "layer" ? absl::StrCat("layer ", r.layer) : r.kind;
}

absl::StatusOr<std::unique_ptr<StreamingTrunk>> StreamingTrunk::Open(
    const pack::PackManifest& manifest, const model::K3Config& config,
    const StreamingTrunkOptions& options) {
  const int layers = config.num_hidden_layers;
  if (options.pinned_layers < 0 || options.pinned_layers > layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pinned_layers ", options.pinned_layers, " outside 0..", layers));
  }
  if (options.pinned_layers < layers && options.ring_slots < 2) {
    return absl::InvalidArgumentError("the trunk ring needs >= 2 slots");
  }
  auto t = std::unique_ptr<StreamingTrunk>(new StreamingTrunk());
  t->config_ = config;
  t->manifest_ = manifest;
  t->options_ = options;
  const pack::PackManifest& m = t->manifest_;
  FLOTILLA_ASSIGN_OR_RETURN(
      t->file_, io::File::Open(options.pack_dir + "/" + m.trunk_file, true));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->pinned_reader_,
      io::MakeBatchReader(options.reader_factory, options.reader,
                          io::BatchReaderOptions{options.queue_depth}));

  // Layouts of every layer, validated before anything is read.
  uint64_t max_unpinned = 0;
  for (int layer = 0; layer < layers; ++layer) {
    const pack::PackRegion* r = m.FindLayer(layer);
    if (r == nullptr) {
      return absl::DataLossError(
          absl::StrCat("pack manifest has no region for layer ", layer));
    }
    const pack::RegionLayout& layout = r->layout;
    if (layout.size != r->size) {
      return absl::DataLossError(
          absl::StrCat("layer ", layer, " region size ", r->size,
                       " differs from its layout size ", layout.size));
    }
    t->layouts_.push_back(layout);
    if (layer >= options.pinned_layers) {
      max_unpinned = std::max(max_unpinned, r->size);
    }
  }

  // Model-level vectors: always resident (a few KB).
  const pack::PackRegion* g = m.FindRegion("globals");
  t->embed_region_ = m.FindRegion("embed");
  t->lm_head_region_ = m.FindRegion("lm_head");
  if (g == nullptr || t->embed_region_ == nullptr ||
      t->lm_head_region_ == nullptr) {
    return absl::DataLossError(
        "pack manifest lacks the globals, embed or lm_head region");
  }
  FLOTILLA_ASSIGN_OR_RETURN(t->globals_buf_,
                            io::AlignedBuffer::Allocate(g->size, true));
  FLOTILLA_RETURN_IF_ERROR(
      t->ReadRegion(*g, t->pinned_reader_.get(), t->globals_buf_.data()));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->globals_, BindGlobals(g->layout, t->globals_buf_.data(), config));

  // Vocab regions: pinned, or read piecewise with chunk checksums.
  for (const pack::PackRegion* r : {t->embed_region_, t->lm_head_region_}) {
    const pack::RegionLayout& layout = r->layout;
    const pack::RegionField* f = layout.Find("matrix");
    if (f == nullptr || f->shape.size() != 2 ||
        f->shape[0] != config.vocab_size || f->shape[1] != config.hidden_size) {
      return absl::DataLossError(absl::StrCat(
          "pack region ", r->kind, " does not hold a [vocab][hidden] matrix"));
    }
    const bool pinned =
        r == t->embed_region_ ? options.embed_pinned : options.lm_head_pinned;
    if (!pinned) {
      VocabStreamOptions vo;
      vo.lm_head_pass_bytes = options.lm_head_chunk_bytes;
      vo.verify_checksums = options.verify_checksums;
      vo.reader = options.reader;
      vo.reader_factory = options.reader_factory;
      const bool embed = r == t->embed_region_;
      FLOTILLA_ASSIGN_OR_RETURN(
          (embed ? t->embed_stream_ : t->lm_head_stream_),
          VocabStream::Create(
              &t->file_, r, f->offset,
              f->dtype == model::DType::kBF16 ? kernels::DenseType::kBF16
                                              : kernels::DenseType::kF32,
              config,
              embed ? VocabStream::Use::kEmbedRows : VocabStream::Use::kLmHead,
              vo));
      continue;
    }
    io::AlignedBuffer& buf =
        r == t->embed_region_ ? t->embed_buf_ : t->lm_head_buf_;
    FLOTILLA_ASSIGN_OR_RETURN(buf, io::AlignedBuffer::Allocate(r->size, true));
    FLOTILLA_RETURN_IF_ERROR(
        t->ReadRegion(*r, t->pinned_reader_.get(), buf.data()));
    FLOTILLA_ASSIGN_OR_RETURN(Matrix mat,
                              BindVocab(layout, buf.data(), config));
    (r == t->embed_region_ ? t->embed_ : t->lm_head_) = mat;
  }

  // The pinned prefix.
  for (int layer = 0; layer < options.pinned_layers; ++layer) {
    Pinned p;
    const pack::PackRegion* r = m.FindLayer(layer);
    FLOTILLA_ASSIGN_OR_RETURN(p.buffer,
                              io::AlignedBuffer::Allocate(r->size, true));
    FLOTILLA_RETURN_IF_ERROR(
        t->ReadRegion(*r, t->pinned_reader_.get(), p.buffer.data()));
    FLOTILLA_ASSIGN_OR_RETURN(
        p.weights,
        BindLayer(t->layouts_[layer], p.buffer.data(), config, layer));
    t->pinned_.push_back(std::move(p));
  }

  // The ring over the rest.
  t->unpinned_ = layers - options.pinned_layers;
  if (t->unpinned_ > 0) {
    t->slots_.resize(options.ring_slots);
    for (Slot& s : t->slots_) {
      FLOTILLA_ASSIGN_OR_RETURN(
          s.buffer, io::AlignedBuffer::Allocate(max_unpinned, true));
    }
    io::BatchReaderOptions ro;
    ro.queue_depth = options.queue_depth;
    ro.chunk_bytes = options.chunk_bytes;
    FLOTILLA_ASSIGN_OR_RETURN(
        t->ring_reader_,
        io::MakeBatchReader(options.reader_factory, options.reader, ro));
    t->reader_thread_ = std::thread([p = t.get()] { p->ReaderLoop(); });
    t->verifier_thread_ = std::thread([p = t.get()] { p->VerifierLoop(); });
  }
  t->ResetStats();
  return t;
}

StreamingTrunk::~StreamingTrunk() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_thread_.joinable()) reader_thread_.join();
  if (verifier_thread_.joinable()) verifier_thread_.join();
}

const char* StreamingTrunk::reader_name() const {
  return pinned_reader_ ? pinned_reader_->name() : "none";
}

absl::Status StreamingTrunk::ReadRegion(const pack::PackRegion& r,
                                        io::BatchReader* reader, uint8_t* dst) {
  io::ReadRequest req;
  req.file = &file_;
  req.offset = r.offset;
  req.length = r.size;
  req.dst = dst;
  FLOTILLA_RETURN_IF_ERROR(reader->Submit({req}));
  FLOTILLA_ASSIGN_OR_RETURN(io::ReadCompletion done, reader->WaitOne());
  if (!done.status.ok()) {
    return absl::Status(done.status.code(),
                        absl::StrCat("reading trunk region ", RegionName(r),
                                     ": ", done.status.message()));
  }
  return VerifyRegion(r, dst, RegionName(r));
}

absl::Status StreamingTrunk::VerifyRegion(const pack::PackRegion& r,
                                          const uint8_t* data,
                                          const std::string& what) const {
  if (!options_.verify_checksums) return absl::OkStatus();
  const uint64_t got = io::Checksum64(data, r.size);
  if (got == r.checksum) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "checksum mismatch in trunk region ", what, " of ", file_.path(),
      " at offset ", r.offset, " (", r.size, " bytes): expected ",
      io::ChecksumHex(r.checksum), ", read ", io::ChecksumHex(got),
      "; the file is damaged: re-run flotilla-tool pack"));
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
  std::lock_guard<std::mutex> lock(mu_);
  TrunkStats s = stats_;
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
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = TrunkStats();
  if (embed_stream_ != nullptr) {
    embed_bytes_at_reset_ = embed_stream_->bytes_read();
  }
  if (lm_head_stream_ != nullptr) {
    lm_head_bytes_at_reset_ = lm_head_stream_->bytes_read();
  }
}

}  // namespace flotilla::coordinator
