#include "coordinator/streaming_trunk.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"

namespace flotilla::coordinator {
namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

std::string RegionName(const model::PackRegion& r) {
  return r.kind == "layer" ? absl::StrCat("layer ", r.layer) : r.kind;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamingTrunk>> StreamingTrunk::Open(
    const model::PackManifest& manifest, const model::K3Config& config,
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
  const model::PackManifest& m = t->manifest_;
  FLOTILLA_ASSIGN_OR_RETURN(
      t->file_, io::File::Open(options.pack_dir + "/" + m.trunk_file, true));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->pinned_reader_,
      io::CreateBatchReader(options.reader, options.queue_depth));

  // Layouts of every layer, validated before anything is read.
  uint64_t max_unpinned = 0;
  for (int layer = 0; layer < layers; ++layer) {
    const model::PackRegion* r = m.FindLayer(layer);
    if (r == nullptr) {
      return absl::DataLossError(
          absl::StrCat("pack manifest has no region for layer ", layer));
    }
    FLOTILLA_ASSIGN_OR_RETURN(RegionLayout layout,
                              LayoutFromJson(r->layout_json));
    if (layout.size != r->size) {
      return absl::DataLossError(
          absl::StrCat("layer ", layer, " region size ", r->size,
                       " differs from its layout size ", layout.size));
    }
    t->layouts_.push_back(std::move(layout));
    if (layer >= options.pinned_layers) {
      max_unpinned = std::max(max_unpinned, r->size);
    }
  }

  // Model-level vectors: always resident (a few KB).
  const model::PackRegion* g = m.FindRegion("globals");
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
  FLOTILLA_ASSIGN_OR_RETURN(RegionLayout g_layout,
                            LayoutFromJson(g->layout_json));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->globals_, BindGlobals(g_layout, t->globals_buf_.data(), config));

  // Vocab regions: pinned, or read piecewise with chunk checksums.
  for (const model::PackRegion* r : {t->embed_region_, t->lm_head_region_}) {
    FLOTILLA_ASSIGN_OR_RETURN(RegionLayout layout,
                              LayoutFromJson(r->layout_json));
    const RegionField* f = layout.Find("matrix");
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
    const model::PackRegion* r = m.FindLayer(layer);
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
    FLOTILLA_ASSIGN_OR_RETURN(t->ring_reader_,
                              io::CreateBatchReader(options.reader, ro));
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

absl::Status StreamingTrunk::ReadRegion(const model::PackRegion& r,
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

absl::Status StreamingTrunk::VerifyRegion(const model::PackRegion& r,
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

void StreamingTrunk::ReaderLoop() {
  // Every free ring slot gets its region's read at once, all in flight
  // together through the ring reader. This thread only reads: checksumming a
  // 70 MB region takes milliseconds, and the reader's small queue of pieces
  // (which keeps expert reads from waiting behind trunk reads) would drain
  // meanwhile and leave the disk idle. VerifierLoop checks each region as it
  // lands, while the forward pass computes the layer before.
  using Clock = std::chrono::steady_clock;
  const uint64_t slots = slots_.size();
  std::vector<uint64_t> in_flight;  // items whose reads are submitted
  std::vector<io::ReadRequest> batch;
  Clock::time_point mark;  // last event while reads were in flight
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || !in_flight.empty() || next_read_ < next_consume_ + slots;
    });
    if (stop_) break;
    batch.clear();
    for (; next_read_ < next_consume_ + slots; ++next_read_) {
      Slot& slot = slots_[next_read_ % slots];
      slot.item = next_read_;
      slot.ready = false;
      slot.checked = false;
      const model::PackRegion* r = manifest_.FindLayer(ItemLayer(next_read_));
      batch.push_back(io::ReadRequest{&file_, r->offset, r->size,
                                      slot.buffer.data(), next_read_});
    }
    lock.unlock();
    if (!batch.empty()) {
      if (in_flight.empty()) mark = Clock::now();
      const absl::Status s = ring_reader_->Submit(batch);
      if (s.ok()) {
        for (const io::ReadRequest& r : batch) in_flight.push_back(r.tag);
      } else {
        // Nothing of the batch was queued: fail those items.
        lock.lock();
        for (const io::ReadRequest& r : batch) {
          Slot& slot = slots_[r.tag % slots];
          slot.status = absl::Status(
              s.code(), absl::StrCat("reading trunk layer ", ItemLayer(r.tag),
                                     ": ", s.message()));
          slot.ready = true;
        }
        cv_.notify_all();
        continue;
      }
    }
    absl::StatusOr<io::ReadCompletion> done = ring_reader_->WaitOne();
    if (!done.ok()) {
      // The reader itself failed: no completion will name these items.
      lock.lock();
      for (uint64_t item : in_flight) {
        Slot& slot = slots_[item % slots];
        slot.status = done.status();
        slot.ready = true;
      }
      in_flight.clear();
      cv_.notify_all();
      continue;
    }
    const uint64_t item = done->tag;
    in_flight.erase(std::find(in_flight.begin(), in_flight.end(), item));
    const Clock::time_point now = Clock::now();
    const double busy = std::chrono::duration<double>(now - mark).count();
    mark = now;
    const model::PackRegion* r = manifest_.FindLayer(ItemLayer(item));
    lock.lock();
    Slot& slot = slots_[item % slots];
    slot.status =
        done->status.ok()
            ? absl::OkStatus()
            : absl::Status(done->status.code(),
                           absl::StrCat("reading trunk region ", RegionName(*r),
                                        ": ", done->status.message()));
    slot.ready = true;
    stats_.bytes_read += r->size;
    stats_.regions_read += 1;
    stats_.read_seconds += busy;
    cv_.notify_all();
  }
  lock.unlock();
  // Reads still in flight write into slot buffers: let them land first.
  for (size_t i = 0; i < in_flight.size(); ++i) {
    if (!ring_reader_->WaitOne().ok()) break;
  }
}

absl::Status StreamingTrunk::BeginStep() {
  if (unpinned_ == 0) return absl::OkStatus();
  // A forward pass that failed part-way left items of its step unconsumed;
  // skip them so the ring is aligned with layer order again.
  while (next_consume_ % unpinned_ != 0) {
    auto w = AcquireLayer(ItemLayer(next_consume_));
    if (w.ok()) ReleaseLayer(ItemLayer(next_consume_));
  }
  return absl::OkStatus();
}

absl::StatusOr<const LayerWeights*> StreamingTrunk::AcquireLayer(int layer) {
  if (layer < 0 || layer >= config_.num_hidden_layers) {
    return absl::OutOfRangeError(absl::StrCat("no layer ", layer));
  }
  if (layer < options_.pinned_layers) return &pinned_[layer].weights;
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t item = next_consume_;
  if (ItemLayer(item) != layer) {
    return absl::FailedPreconditionError(
        absl::StrCat("trunk layers must be acquired in order: expected layer ",
                     ItemLayer(item), ", got ", layer));
  }
  Slot& slot = slots_[item % slots_.size()];
  const auto start = std::chrono::steady_clock::now();
  cv_.wait(lock, [&] { return stop_ || (slot.item == item && slot.checked); });
  stats_.wait_seconds += Since(start);
  if (stop_) return absl::CancelledError("trunk reader stopped");
  if (!slot.status.ok()) {
    // Consume the failed item so the ring stays in step.
    ++next_consume_;
    cv_.notify_all();
    return slot.status;
  }
  slot.in_use = true;
  return &slot.weights;
}

void StreamingTrunk::VerifierLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Slot* slot = nullptr;
    cv_.wait(lock, [&] {
      slot = &slots_[next_verify_ % slots_.size()];
      return stop_ || (slot->item == next_verify_ && slot->ready);
    });
    if (stop_) break;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    if (slot->status.ok()) {
      const int layer = ItemLayer(slot->item);
      const model::PackRegion* r = manifest_.FindLayer(layer);
      absl::Status s = VerifyRegion(*r, slot->buffer.data(), RegionName(*r));
      if (s.ok()) {
        absl::StatusOr<LayerWeights> w =
            BindLayer(layouts_[layer], slot->buffer.data(), config_, layer);
        s = w.status();
        if (w.ok()) slot->weights = *w;
      }
      slot->status = s;
    }
    lock.lock();
    stats_.verify_seconds += Since(start);
    slot->checked = true;
    ++next_verify_;
    cv_.notify_all();
  }
}

const LayerWeights* StreamingTrunk::PeekLayer(int layer) {
  if (layer < 0 || layer >= config_.num_hidden_layers) return nullptr;
  if (layer < options_.pinned_layers) return &pinned_[layer].weights;
  // The next item's slot, if the reader has filled it already. The slot
  // cannot be recycled before that item is consumed, so the pointer stays
  // valid until then.
  // The item is the one in use (current layer unpinned) plus one, or the
  // next one when the current layer is pinned.
  // Only a verified slot: nothing unverified is used, not even for a guess.
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t item : {next_consume_, next_consume_ + 1}) {
    if (ItemLayer(item) != layer) continue;
    const Slot& slot = slots_[item % slots_.size()];
    if (slot.item != item || !slot.checked || !slot.status.ok()) return nullptr;
    return &slot.weights;
  }
  return nullptr;
}

void StreamingTrunk::ReleaseLayer(int layer) {
  if (layer < options_.pinned_layers) return;
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_[next_consume_ % slots_.size()];
  slot.in_use = false;
  ++next_consume_;
  cv_.notify_all();
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

uint64_t StreamingTrunk::VocabBytesRead() const {
  uint64_t n = 0;
  for (const auto* v : {embed_stream_.get(), lm_head_stream_.get()}) {
    if (v != nullptr) n += v->bytes_read();
  }
  return n;
}

TrunkStats StreamingTrunk::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TrunkStats s = stats_;
  s.bytes_read += VocabBytesRead() - vocab_bytes_at_reset_;
  return s;
}

void StreamingTrunk::ResetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = TrunkStats();
  vocab_bytes_at_reset_ = VocabBytesRead();
}

}  // namespace flotilla::coordinator
