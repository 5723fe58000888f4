// ExpertFetcher::Fetch: the per-step loop (classify keys, issue reads,
// consume completions, recycle slots) and its error path.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/expert_fetcher.h"
#include "shared/io/checksum.h"

namespace flotilla::experts {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

absl::Status ExpertFetcher::Fetch(const std::vector<ExpertKey>& keys,
                                  const ReadyFn& on_ready,
                                  const std::vector<ExpertKey>* lookahead) {
  if (!broken_.ok()) return broken_;
  // Validate everything before touching any slot.
  seen_.clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    FLOTILLA_RETURN_IF_ERROR(index_->Get(keys[i]).status());
    auto [it, inserted] = seen_.emplace(keys[i].Packed(), static_cast<int>(i));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Fetch: layer ", keys[i].layer, " expert ", keys[i].expert,
          " requested twice (keys ", it->second, " and ", i, ")"));
    }
  }
  if (lookahead != nullptr) {
    for (const ExpertKey& key : *lookahead) {
      FLOTILLA_RETURN_IF_ERROR(index_->Get(key).status());
    }
  }
  const Clock::time_point t0 = Clock::now();
  absl::Status status = FetchLoop(keys, on_ready, lookahead);
  if (status.ok() && lookahead != nullptr) {
    // Whatever lookahead did not fit while this step ran goes into the slots
    // it has just given back; the disk would otherwise idle until the next
    // Fetch.
    QueuePrefetches(*lookahead, &next_lookahead_);
    stats_.prefetch_dropped += lookahead->size() - next_lookahead_;
    status = SubmitQueued();
  }
  if (!status.ok()) status = Abort(std::move(status));
  lookahead_ = nullptr;
  stats_.fetch_seconds += SecondsSince(t0);
  return status;
}

absl::Status ExpertFetcher::FetchLoop(const std::vector<ExpertKey>& keys,
                                      const ReadyFn& on_ready,
                                      const std::vector<ExpertKey>* lookahead) {
  ++stats_.fetches;
  stats_.experts_requested += keys.size();
  misses_.clear();
  ready_.clear();
  next_miss_ = 0;
  wanted_in_flight_ = 0;
  orphans_in_flight_ = 0;
  lookahead_ = nullptr;  // set below, once old prefetches are sorted out
  next_lookahead_ = 0;

  fetch_layers_.clear();
  for (const ExpertKey& key : keys) {
    if (std::find(fetch_layers_.begin(), fetch_layers_.end(), key.layer) ==
        fetch_layers_.end()) {
      fetch_layers_.push_back(key.layer);
    }
    auto it = where_.find(key.Packed());
    if (it == where_.end()) {
      misses_.emplace_back(key, index_->Find(key));
      continue;
    }
    Slot& slot = slots_[it->second];
    slot.wanted = true;
    if (slot.prefetch) {
      ++stats_.prefetch_hits;
      stats_.prefetch_hit_bytes +=
          io::AlignForDirectIo(slot.loc->offset, slot.loc->length).length;
      slot.prefetch = false;  // used, so never counted as wasted
    } else if (slot.cached) {
      ++stats_.cache_hits;
    }
    if (slot.state == SlotState::kLanded) {
      ready_.push_back(it->second);
    } else {
      ++wanted_in_flight_;
    }
  }
  // Prefetches of this step's layers that it did not ask for were wrong
  // guesses: drop them (prefetches for other layers stay).
  for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
    Slot& slot = slots_[s];
    if (!slot.prefetch || slot.wanted ||
        std::find(fetch_layers_.begin(), fetch_layers_.end(), slot.key.layer) ==
            fetch_layers_.end()) {
      continue;
    }
    if (slot.state == SlotState::kLanded) {
      FreeSlot(s);
    } else {
      slot.orphan = true;
      ++orphans_in_flight_;
    }
  }
  lookahead_ = lookahead;
  FLOTILLA_RETURN_IF_ERROR(IssueMisses());
  // Resident runs compute while the reads just issued are on their way,
  // with the wanted reads that have landed meanwhile (prefetches, mostly).
  FLOTILLA_RETURN_IF_ERROR(PollLanded());
  FLOTILLA_RETURN_IF_ERROR(ConsumeReady(on_ready));
  while (next_miss_ < misses_.size() || wanted_in_flight_ > 0 ||
         orphans_in_flight_ > 0) {
    FLOTILLA_RETURN_IF_ERROR(WaitAndDispatch(on_ready));
  }
  return absl::OkStatus();
}

absl::Status ExpertFetcher::ReaderBroke(const absl::Status& status) {
  broken_ = absl::Status(status.code(),
                         absl::StrCat("expert reader (", reader_->name(),
                                      ") failed: ", status.message()));
  return broken_;
}

absl::Status ExpertFetcher::WaitAndDispatch(const ReadyFn& on_ready) {
  if (reader_->in_flight() == 0) {
    return absl::InternalError(
        "expert fetcher: no free slot and no read in flight (slot "
        "accounting bug)");
  }
  const Clock::time_point t0 = Clock::now();
  absl::StatusOr<io::ReadCompletion> c = reader_->WaitOne();
  stats_.io_wait_seconds += SecondsSince(t0);
  if (!c.ok()) return ReaderBroke(c.status());
  Land(*std::move(c));  // ready_ is empty between ConsumeReady calls
  // Whatever else landed meanwhile is handled with it.
  FLOTILLA_RETURN_IF_ERROR(PollLanded());
  return ConsumeReady(on_ready);
}

absl::Status ExpertFetcher::PollLanded() {
  while (reader_->in_flight() > 0) {
    absl::StatusOr<std::optional<io::ReadCompletion>> c = reader_->PollOne();
    if (!c.ok()) return ReaderBroke(c.status());
    if (!c->has_value()) break;
    Land(**std::move(c));
  }
  return absl::OkStatus();
}

absl::Status ExpertFetcher::ConsumeReady(const ReadyFn& on_ready) {
  // As many checksums together as the pool has threads, then those runs
  // compute. Hashing all of ready_ first would hold every slot longer, and
  // where slots are few the disk would idle meanwhile; a group releases its
  // first slot no later than hashing one run at a time would.
  const size_t group =
      options_.pool != nullptr ? options_.pool->num_threads() : 1;
  for (size_t g = 0; g < ready_.size(); g += group) {
    const size_t end = std::min(ready_.size(), g + group);
    FLOTILLA_RETURN_IF_ERROR(VerifyLanded(ready_.data() + g, end - g));
    for (size_t i = g; i < end; ++i) {
      FLOTILLA_RETURN_IF_ERROR(Consume(ready_[i], on_ready));
      FLOTILLA_RETURN_IF_ERROR(IssueMisses());
    }
  }
  ready_.clear();
  // Slots that Land freed (dropped guesses) take the next misses.
  return IssueMisses();
}

void ExpertFetcher::Land(io::ReadCompletion c) {
  const int s = static_cast<int>(c.tag);
  Slot& slot = slots_[s];
  slot.state = SlotState::kLanded;
  slot.read_status = std::move(c.status);
  stats_.read_latency.Add(SecondsSince(slot.queued));
  if (slot.wanted) {
    --wanted_in_flight_;
    ready_.push_back(s);
    return;
  }
  if (slot.orphan) {  // a dropped guess for this step's layer
    --orphans_in_flight_;
    FreeSlot(s);
    return;
  }
  // A prefetch for another layer: keep it unless it failed. Its checksum is
  // checked now, while this step waits on the disk for its own runs, so the
  // hash overlaps those reads instead of delaying the layer that uses it. A
  // run that fails is dropped: read again on demand, it fails there, naming
  // the expert.
  if (slot.read_status.ok() && options_.verify_checksums && !slot.verified) {
    const Clock::time_point t0 = Clock::now();
    const bool good = VerifyRun(slot).ok();
    stats_.early_verify_seconds += SecondsSince(t0);
    if (!good) {
      FreeSlot(s);
      return;
    }
    slot.verified = true;
  }
  if (!slot.read_status.ok()) FreeSlot(s);
}

absl::Status ExpertFetcher::VerifyRun(const Slot& slot) {
  const ExpertLocation& loc = *slot.loc;
  if (!options_.verify_checksums || !loc.has_checksum) return absl::OkStatus();
  const Clock::time_point t0 = Clock::now();
  const uint64_t got = io::Checksum64(slot.data + slot.skip, loc.length);
  stats_.verify_seconds += SecondsSince(t0);
  ++stats_.checksums_verified;
  return CheckRunSum(slot, got);
}

absl::Status ExpertFetcher::VerifyLanded(const int* ready, size_t n) {
  to_verify_.clear();
  for (size_t i = 0; i < n; ++i) {
    const int s = ready[i];
    const Slot& slot = slots_[s];
    if (!slot.verified && slot.read_status.ok() && options_.verify_checksums &&
        slot.loc->has_checksum) {
      to_verify_.push_back(s);
    }
  }
  // One run is hashed in Consume as before; a pool pays from two on.
  if (to_verify_.size() < 2 || options_.pool == nullptr) {
    return absl::OkStatus();
  }
  sums_.resize(to_verify_.size());
  const Clock::time_point t0 = Clock::now();
  // XXH3 of one run is sequential and memory-bound (~14 GB/s on one core
  // here), so the pool's threads hash different runs.
  kernels::ParallelFor(
      options_.pool, to_verify_.size(), 1, [this](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          const Slot& slot = slots_[to_verify_[i]];
          sums_[i] = io::Checksum64(slot.data + slot.skip, slot.loc->length);
        }
      });
  stats_.verify_seconds += SecondsSince(t0);
  for (size_t i = 0; i < to_verify_.size(); ++i) {
    Slot& slot = slots_[to_verify_[i]];
    ++stats_.checksums_verified;
    ++stats_.checksums_verified_together;
    FLOTILLA_RETURN_IF_ERROR(CheckRunSum(slot, sums_[i]));
    slot.verified = true;
  }
  return absl::OkStatus();
}

absl::Status ExpertFetcher::CheckRunSum(const Slot& slot, uint64_t got) const {
  const ExpertLocation& loc = *slot.loc;
  if (got != loc.checksum) {
    return absl::DataLossError(absl::StrCat(
        "checksum mismatch for layer ", slot.key.layer, " expert ",
        slot.key.expert, " in ", index_->files()[loc.file], " at offset ",
        loc.offset, " (", loc.length, " bytes): expected ",
        io::ChecksumHex(loc.checksum), ", got ", io::ChecksumHex(got),
        "; the file is corrupt or changed since it was indexed/packed"));
  }
  return absl::OkStatus();
}

absl::Status ExpertFetcher::Consume(int s, const ReadyFn& on_ready) {
  Slot& slot = slots_[s];
  if (!slot.read_status.ok()) {
    return absl::Status(slot.read_status.code(),
                        absl::StrCat("reading ", index_->Describe(slot.key),
                                     ": ", slot.read_status.message()));
  }
  if (!slot.verified) {
    FLOTILLA_RETURN_IF_ERROR(VerifyRun(slot));
    slot.verified = true;
  }
  const Clock::time_point t0 = Clock::now();
  absl::Status status = on_ready(slot.key, slot.data + slot.skip);
  stats_.compute_seconds += SecondsSince(t0);
  Release(s);
  return status;
}

void ExpertFetcher::Release(int s) {
  Slot& slot = slots_[s];
  slot.wanted = false;
  slot.prefetch = false;
  if (options_.cache_slots == 0) {
    FreeSlot(s);
    return;
  }
  if (!slot.cached) {
    slot.cached = true;
    ++cached_count_;
  }
  slot.last_use = ++tick_;
  if (cached_count_ <= static_cast<size_t>(options_.cache_slots)) return;
  // Over capacity: drop the least recently used run no one is waiting for
  // (this one only if every other cached run is still wanted this step).
  int victim = -1;
  for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
    const Slot& c = slots_[i];
    if (c.cached && !c.wanted &&
        (victim < 0 || c.last_use < slots_[victim].last_use)) {
      victim = i;
    }
  }
  FreeSlot(victim >= 0 ? victim : s);
}

absl::Status ExpertFetcher::Abort(absl::Status status) {
  // Nothing may land in a buffer after we report: drain every read first.
  while (broken_.ok() && reader_->in_flight() > 0) {
    absl::StatusOr<io::ReadCompletion> c = reader_->WaitOne();
    if (!c.ok()) {
      broken_ = c.status();
      break;
    }
    slots_[c->tag].state = SlotState::kLanded;
  }
  if (broken_.ok()) {
    // Keep only verified cache entries; a run that failed its checksum or
    // was never used is forgotten.
    for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
      Slot& slot = slots_[s];
      if (slot.state == SlotState::kFree) continue;
      if (slot.cached) {
        slot.wanted = false;
      } else {
        FreeSlot(s);
      }
    }
  }
  requests_.clear();
  ready_.clear();
  misses_.clear();
  next_miss_ = 0;
  wanted_in_flight_ = 0;
  orphans_in_flight_ = 0;
  return status;
}

}  // namespace flotilla::experts
