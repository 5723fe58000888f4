#include "shared/experts/expert_fetcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/checksum.h"

namespace flotilla::experts {
namespace {

constexpr const char* kSlotsOwner = "experts.slots";
constexpr const char* kCacheOwner = "experts.cache";

double Ratio(uint64_t num, uint64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / den;
}

}  // namespace

double FetchStats::cache_hit_rate() const {
  return Ratio(cache_hits, experts_requested);
}

double FetchStats::prefetch_hit_rate() const {
  return Ratio(prefetch_hits, prefetch_issued);
}

std::string FetchStats::ToString() const {
  const double gbps =
      fetch_seconds > 0 ? bytes_read / fetch_seconds / 1e9 : 0.0;
  return absl::StrCat(
      "experts: ", experts_requested, " requested in ", fetches, " fetches; ",
      reads, " reads, ", io::FormatBytes(bytes_read), " read (",
      io::FormatBytes(run_bytes_read), " expert runs); cache hits ", cache_hits,
      " (", absl::SixDigits(100 * cache_hit_rate()), "%); prefetch ",
      prefetch_issued, " issued, ", prefetch_hits, " used (",
      absl::SixDigits(100 * prefetch_hit_rate()), "%), ", prefetch_wasted,
      " wasted, ", prefetch_dropped, " dropped; ", checksums_verified,
      " checksums; time ", absl::SixDigits(fetch_seconds), " s in Fetch (",
      absl::SixDigits(gbps), " GB/s), ", absl::SixDigits(io_wait_seconds),
      " s waiting on disk, ", absl::SixDigits(compute_seconds),
      " s computing, ", absl::SixDigits(verify_seconds), " s verifying (",
      absl::SixDigits(early_verify_seconds), " s of it as prefetches landed)");
}

absl::StatusOr<std::unique_ptr<ExpertFetcher>> ExpertFetcher::Create(
    const ExpertIndex* index, const FetcherOptions& options) {
  if (index == nullptr || index->size() == 0) {
    return absl::InvalidArgumentError("ExpertFetcher needs a non-empty index");
  }
  if (options.slots < 1 || options.cache_slots < 0 || options.queue_depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert fetcher needs slots >= 1, cache_slots >= 0 and queue_depth "
        ">= 1; got ",
        options.slots, ", ", options.cache_slots, ", ", options.queue_depth));
  }
  auto fetcher =
      std::unique_ptr<ExpertFetcher>(new ExpertFetcher(index, options));
  FLOTILLA_RETURN_IF_ERROR(fetcher->Init());
  return fetcher;
}

absl::Status ExpertFetcher::Init() {
  slot_bytes_ = std::max<uint64_t>(index_->max_aligned_run_bytes(),
                                   io::kDirectIoAlignment);
  for (const std::string& path : index_->files()) {
    FLOTILLA_ASSIGN_OR_RETURN(io::File f,
                              io::File::Open(path, options_.direct_io));
    all_direct_ = all_direct_ && f.direct();
    files_.push_back(std::move(f));
  }
  for (const ExpertKey& key : index_->Keys()) {
    const ExpertLocation* loc = index_->Find(key);
    const io::File& f = files_[loc->file];
    if (loc->offset > f.size() || loc->length > f.size() - loc->offset) {
      return absl::OutOfRangeError(absl::StrCat(
          "layer ", key.layer, " expert ", key.expert, ": run at offset ",
          loc->offset, " (", loc->length, " bytes) lies past the end of ",
          f.path(), " (", f.size(), " bytes)"));
    }
  }
  if (options_.accountant != nullptr) {
    FLOTILLA_RETURN_IF_ERROR(
        options_.accountant->Charge(kSlotsOwner, slot_bytes_ * options_.slots));
    if (options_.cache_slots > 0) {
      absl::Status s = options_.accountant->Charge(
          kCacheOwner, slot_bytes_ * options_.cache_slots);
      if (!s.ok()) {
        options_.accountant->Release(kSlotsOwner, slot_bytes_ * options_.slots);
        return s;
      }
    }
  }
  // Set before anything can fail below, so the destructor releases.
  charged_ = options_.accountant != nullptr;
  const int n = options_.slots + options_.cache_slots;
  slots_.resize(n);
  FLOTILLA_ASSIGN_OR_RETURN(
      arena_, io::AlignedBuffer::Allocate(slot_bytes_ * n, options_.prefault));
  for (int s = 0; s < n; ++s) slots_[s].data = arena_.data() + slot_bytes_ * s;
  where_.reserve(n);
  io::BatchReaderOptions ro;
  ro.queue_depth = options_.queue_depth;
  ro.chunk_bytes = options_.chunk_bytes;
  FLOTILLA_ASSIGN_OR_RETURN(
      reader_,
      io::MakeBatchReader(options_.reader_factory, options_.reader, ro));
  return absl::OkStatus();
}

ExpertFetcher::~ExpertFetcher() {
  // Drain first: the kernel may still be writing into slot buffers.
  reader_.reset();
  if (charged_) {
    options_.accountant->Release(kSlotsOwner, slot_bytes_ * options_.slots);
    if (options_.cache_slots > 0) {
      options_.accountant->Release(kCacheOwner,
                                   slot_bytes_ * options_.cache_slots);
    }
  }
}

uint64_t ExpertFetcher::buffer_bytes() const {
  return slot_bytes_ *
         static_cast<uint64_t>(options_.slots + options_.cache_slots);
}

int ExpertFetcher::TakeSlot(bool evict) {
  int victim = -1;
  for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
    const Slot& slot = slots_[s];
    if (slot.state == SlotState::kFree) return s;
    if (evict && slot.state == SlotState::kLanded && !slot.wanted &&
        (slot.cached || slot.prefetch) &&
        (victim < 0 || slot.last_use < slots_[victim].last_use)) {
      victim = s;
    }
  }
  if (victim >= 0) FreeSlot(victim);
  return victim;
}

void ExpertFetcher::FreeSlot(int s) {
  Slot& slot = slots_[s];
  if (slot.state != SlotState::kFree) where_.erase(slot.key.Packed());
  if (slot.cached) --cached_count_;
  if (slot.prefetch) ++stats_.prefetch_wasted;
  const uint64_t keep_tick = slot.last_use;
  uint8_t* const data = slot.data;
  slot = Slot();
  slot.data = data;
  slot.last_use = keep_tick;
}

void ExpertFetcher::QueueRead(int s, const ExpertKey& key,
                              const ExpertLocation* loc, bool prefetch) {
  Slot& slot = slots_[s];
  const io::AlignedRange r = io::AlignForDirectIo(loc->offset, loc->length);
  slot.state = SlotState::kReading;
  slot.key = key;
  slot.loc = loc;
  slot.skip = r.skip;
  slot.prefetch = prefetch;
  slot.orphan = false;
  slot.wanted = !prefetch;
  slot.last_use = ++tick_;  // a fresh prefetch is not the first to evict
  slot.verified = false;
  slot.read_status = absl::OkStatus();
  slot.queued = std::chrono::steady_clock::now();
  where_[key.Packed()] = s;
  requests_.push_back(io::ReadRequest{&files_[loc->file], r.offset, r.length,
                                      slot.data, static_cast<uint64_t>(s)});
  ++stats_.reads;
  stats_.bytes_read += r.length;
  stats_.run_bytes_read += loc->length;
  if (prefetch) ++stats_.prefetch_issued;
}

absl::Status ExpertFetcher::SubmitQueued() {
  if (requests_.empty()) return absl::OkStatus();
  absl::Status s = reader_->Submit(requests_);
  if (!s.ok()) {
    // Nothing of the batch was queued: undo the slots it claimed.
    for (const io::ReadRequest& r : requests_) {
      Slot& slot = slots_[r.tag];
      if (slot.wanted && !slot.prefetch) --wanted_in_flight_;
      slot.prefetch = false;  // never issued, so not "wasted"
      FreeSlot(static_cast<int>(r.tag));
    }
    requests_.clear();
    return absl::Status(s.code(),
                        absl::StrCat("submitting expert reads: ", s.message()));
  }
  requests_.clear();
  return absl::OkStatus();
}

void ExpertFetcher::QueuePrefetches(const std::vector<ExpertKey>& keys,
                                    size_t* next) {
  while (*next < keys.size()) {
    const ExpertKey& key = keys[*next];
    if (where_.contains(key.Packed())) {  // already resident or reading
      ++*next;
      continue;
    }
    const int s = TakeSlot(/*evict=*/false);
    if (s < 0) return;
    QueueRead(s, key, index_->Find(key), /*prefetch=*/true);
    ++*next;
  }
}

absl::Status ExpertFetcher::IssueMisses() {
  while (next_miss_ < misses_.size()) {
    const int s = TakeSlot(/*evict=*/true);
    if (s < 0) break;
    const auto& [key, loc] = misses_[next_miss_++];
    QueueRead(s, key, loc, /*prefetch=*/false);
    ++wanted_in_flight_;
  }
  // Speculation only once every demand read is on its way.
  if (next_miss_ == misses_.size() && lookahead_ != nullptr) {
    QueuePrefetches(*lookahead_, &next_lookahead_);
  }
  return SubmitQueued();
}

absl::Status ExpertFetcher::Prefetch(const std::vector<ExpertKey>& keys) {
  if (!broken_.ok()) return broken_;
  for (const ExpertKey& key : keys) {
    FLOTILLA_RETURN_IF_ERROR(index_->Get(key).status());
  }
  size_t next = 0;
  QueuePrefetches(keys, &next);
  stats_.prefetch_dropped += keys.size() - next;
  return SubmitQueued();
}

}  // namespace flotilla::experts
