#include "coordinator/stream/region_ring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"

namespace flotilla::coordinator {

std::string RegionRing::RegionName(const pack::PackRegion& r) {
  return r.kind == "layer" ? absl::StrCat("layer ", r.layer) : r.kind;
}

absl::StatusOr<std::unique_ptr<RegionRing>> RegionRing::Open(
    const pack::PackManifest& manifest, int num_layers, RegionBinder bind,
    const RegionRingOptions& options) {
  if (options.pinned_layers < 0 || options.pinned_layers > num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pinned_layers ", options.pinned_layers, " outside 0..", num_layers));
  }
  if (options.pinned_layers < num_layers && options.ring_slots < 2) {
    return absl::InvalidArgumentError("the trunk ring needs >= 2 slots");
  }
  auto t = std::unique_ptr<RegionRing>(new RegionRing());
  t->manifest_ = manifest;
  t->bind_ = std::move(bind);
  t->options_ = options;
  t->num_layers_ = num_layers;
  const pack::PackManifest& m = t->manifest_;
  FLOTILLA_ASSIGN_OR_RETURN(
      t->file_, io::File::Open(options.pack_dir + "/" + m.trunk_file, true));
  FLOTILLA_ASSIGN_OR_RETURN(
      t->pinned_reader_,
      io::MakeBatchReader(options.reader_factory, options.reader,
                          io::BatchReaderOptions{options.queue_depth}));

  // Every layer's region, checked before anything is read.
  uint64_t max_unpinned = 0;
  for (int layer = 0; layer < num_layers; ++layer) {
    const pack::PackRegion* r = m.FindLayer(layer);
    if (r == nullptr) {
      return absl::DataLossError(
          absl::StrCat("pack manifest has no region for layer ", layer));
    }
    if (r->layout.size != r->size) {
      return absl::DataLossError(
          absl::StrCat("layer ", layer, " region size ", r->size,
                       " differs from its layout size ", r->layout.size));
    }
    t->regions_.push_back(r);
    if (layer >= options.pinned_layers) {
      max_unpinned = std::max(max_unpinned, r->size);
    }
  }

  t->max_unpinned_ = max_unpinned;
  t->unpinned_ = num_layers - options.pinned_layers;
  return t;
}

absl::Status RegionRing::Start() {
  if (started_) return absl::FailedPreconditionError("ring started twice");
  started_ = true;
  // The pinned prefix.
  for (int layer = 0; layer < options_.pinned_layers; ++layer) {
    Pinned p;
    const pack::PackRegion* r = regions_[layer];
    FLOTILLA_ASSIGN_OR_RETURN(p.buffer,
                              io::AlignedBuffer::Allocate(r->size, true));
    FLOTILLA_RETURN_IF_ERROR(
        ReadWith(*r, pinned_reader_.get(), p.buffer.data()));
    FLOTILLA_ASSIGN_OR_RETURN(p.bound,
                              bind_(layer, r->layout, p.buffer.data()));
    pinned_.push_back(std::move(p));
  }
  // Counted from here on: reset before the reader thread starts, or a read
  // that lands first would be counted and then lost.
  ResetStats();
  // The ring over the rest.
  if (unpinned_ > 0) {
    slots_.resize(options_.ring_slots);
    for (Slot& s : slots_) {
      FLOTILLA_ASSIGN_OR_RETURN(
          s.buffer, io::AlignedBuffer::Allocate(max_unpinned_, true));
    }
    io::BatchReaderOptions ro;
    ro.queue_depth = options_.queue_depth;
    ro.chunk_bytes = options_.chunk_bytes;
    FLOTILLA_ASSIGN_OR_RETURN(
        ring_reader_,
        io::MakeBatchReader(options_.reader_factory, options_.reader, ro));
    reader_thread_ = std::thread([this] { ReaderLoop(); });
    verifier_thread_ = std::thread([this] { VerifierLoop(); });
  }
  return absl::OkStatus();
}

RegionRing::~RegionRing() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_thread_.joinable()) reader_thread_.join();
  if (verifier_thread_.joinable()) verifier_thread_.join();
}

const char* RegionRing::reader_name() const {
  return pinned_reader_ ? pinned_reader_->name() : "none";
}

absl::Status RegionRing::ReadRegion(const pack::PackRegion& r, uint8_t* dst) {
  return ReadWith(r, pinned_reader_.get(), dst);
}

absl::Status RegionRing::ReadWith(const pack::PackRegion& r,
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

absl::Status RegionRing::VerifyRegion(const pack::PackRegion& r,
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

uint64_t RegionRing::resident_bytes() const {
  uint64_t bytes = 0;
  for (const Pinned& p : pinned_) bytes += p.buffer.size();
  return bytes + slots_.size() * max_unpinned_;
}

TrunkStats RegionRing::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void RegionRing::ResetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = TrunkStats();
}

}  // namespace flotilla::coordinator
