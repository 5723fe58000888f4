// The ring of RegionRing: the reader thread that keeps the next unpinned
// layers' reads in flight, the verifier thread that checks and binds each
// region as it lands, and the forward pass's side (acquire, peek, release).
// Opening, the pinned layers and whole-region reads are in region_ring.cc.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/stream/region_ring.h"
#include "shared/base/elapsed.h"

namespace flotilla::coordinator {
using base::SecondsSince;

void RegionRing::ReaderLoop() {
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
      slot.submitted = Clock::now();
      const pack::PackRegion* r = regions_[ItemLayer(next_read_)];
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
    const double busy = base::Seconds(now - mark);
    mark = now;
    const pack::PackRegion* r = regions_[ItemLayer(item)];
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
    stats_.region_read_latency.Add(base::Seconds(now - slot.submitted));
    cv_.notify_all();
  }
  lock.unlock();
  // Reads still in flight write into slot buffers: let them land first.
  for (size_t i = 0; i < in_flight.size(); ++i) {
    if (!ring_reader_->WaitOne().ok()) break;
  }
}

absl::Status RegionRing::BeginStep() {
  if (unpinned_ == 0) return absl::OkStatus();
  // A forward pass that failed part-way left items of its step unconsumed;
  // skip them so the ring is aligned with layer order again.
  while (next_consume_ % unpinned_ != 0) {
    auto w = Acquire(ItemLayer(next_consume_));
    if (w.ok()) Release(ItemLayer(next_consume_));
  }
  return absl::OkStatus();
}

absl::StatusOr<const BoundRegion*> RegionRing::Acquire(int layer) {
  if (layer < 0 || layer >= num_layers_) {
    return absl::OutOfRangeError(absl::StrCat("no layer ", layer));
  }
  if (layer < options_.pinned_layers) return pinned_[layer].bound.get();
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
  stats_.wait_seconds += SecondsSince(start);
  if (stop_) return absl::CancelledError("trunk reader stopped");
  if (!slot.status.ok()) {
    // Consume the failed item so the ring stays in step. The caller gets a
    // Status of its own, not a reference to the slot's: the reader thread
    // replaces the slot's when it reuses the slot, and a shared Status rep
    // would be freed there while this thread may still hold it (its
    // refcount lives in Debian's uninstrumented libabsl_status, so
    // ThreadSanitizer cannot see that hand-off either).
    ++next_consume_;
    cv_.notify_all();
    return absl::Status(slot.status.code(), slot.status.message());
  }
  slot.in_use = true;
  return slot.bound.get();
}

void RegionRing::VerifierLoop() {
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
      const pack::PackRegion* r = regions_[layer];
      absl::Status s = VerifyRegion(*r, slot->buffer.data(), RegionName(*r));
      slot->bound.reset();
      if (s.ok()) {
        absl::StatusOr<std::unique_ptr<BoundRegion>> b =
            bind_(layer, r->layout, slot->buffer.data());
        s = b.status();
        if (b.ok()) slot->bound = *std::move(b);
      }
      slot->status = s;
    }
    lock.lock();
    stats_.verify_seconds += SecondsSince(start);
    slot->checked = true;
    ++next_verify_;
    cv_.notify_all();
  }
}

const BoundRegion* RegionRing::Peek(int layer) {
  if (layer < 0 || layer >= num_layers_) return nullptr;
  if (layer < options_.pinned_layers) return pinned_[layer].bound.get();
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
    return slot.bound.get();
  }
  return nullptr;
}

void RegionRing::Release(int layer) {
  if (layer < options_.pinned_layers) return;
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_[next_consume_ % slots_.size()];
  slot.in_use = false;
  ++next_consume_;
  cv_.notify_all();
}

}  // namespace flotilla::coordinator
