// ExpertFetcher: streams expert runs from disk into a fixed pool of aligned
// slot buffers and hands each one to a callback as soon as its bytes land.
//
// Fetch(keys) issues reads for as many of `keys` as there are slots (all of
// them when slots allow) in one BatchReader submission (io_uring, or a pread
// pool), O_DIRECT where the filesystem allows; then, in completion order,
// verifies each run's checksum (when the index has one and verification is
// on), calls on_ready(key, run), recycles the slot and issues the next read.
// Every key is read at most once per Fetch. Memory is fixed at creation:
// (slots + cache_slots) buffers of slot_bytes(), carved from one prefaulted
// allocation.
//
// Optional, both off by default, neither changes any byte handed out:
//  * Cache (cache_slots C > 0): after use a run stays resident (LRU, at most
//    C runs); a later Fetch of a resident key skips the read. cache_hits
//    counts only keys resident when requested (true resident hits).
//  * Lookahead: predicted keys (normally of the next layer) are read into
//    free slots while the disk would otherwise idle: either passed to Fetch
//    as `lookahead` (issued once all of that Fetch's own reads are issued,
//    and at its end), or given to Prefetch() (issued at once; call it when
//    no demand reads are due, e.g. while attention runs). A later Fetch of a
//    prefetched key uses that read instead of issuing another
//    (prefetch_hits). The first Fetch that touches a prefetched run's layer
//    without asking for it drops it (prefetch_wasted); so may a demand read
//    that needs its slot. Hints with no free slot are dropped
//    (prefetch_dropped): speculation never evicts cached runs, and a Fetch's
//    `lookahead` never goes ahead of that Fetch's own reads.
//
// After Fetch returns (OK) the only reads in flight are prefetches for other
// layers; after an error, none. On any error every read in flight is drained
// before returning, so no buffer is written after the error is reported, and a
// run that failed its checksum is never kept.
//
// Thread-compatibility: not thread-safe. One thread calls Fetch/Prefetch;
// on_ready runs on that thread and must not call back into the fetcher.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_FETCHER_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_FETCHER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/base/latency_counts.h"
#include "shared/experts/expert_index.h"
#include "shared/io/aligned_buffer.h"
#include "shared/io/batch_reader.h"
#include "shared/io/file.h"
#include "shared/io/memory_budget.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::experts {

struct FetcherOptions {
  // Streaming slots S (>= 1): runs in flight or being computed at once.
  int slots = 16;
  // Cache slots C (>= 0): extra buffers whose runs stay resident. 0 = off.
  int cache_slots = 0;
  // BatchReader queue depth (io_uring entries / pread threads), >= 1.
  int queue_depth = 32;
  // Reads longer than this are split into pieces in flight together.
  uint64_t chunk_bytes = 8ull << 20;
  io::ReaderKind reader = io::ReaderKind::kAuto;
  io::ReaderFactory reader_factory;  // empty: io::CreateBatchReader
  // O_DIRECT where the filesystem allows (File falls back to buffered).
  bool direct_io = true;
  // Verify the index's checksums (where present) before a run is used.
  bool verify_checksums = true;
  // When set, runs that have landed together (a layer's prefetches,
  // mostly) are hashed on this pool's threads, one run per task, before
  // any of them is used; null: one after another on the Fetch thread.
  // Must outlive the fetcher; on_ready may use the same pool (the hashing
  // is done before on_ready runs, never inside it).
  kernels::ThreadPool* pool = nullptr;
  // Fault every slot page in at creation, so no page fault lands inside a
  // timed read.
  bool prefault = true;
  // When set, slot memory is charged to "experts.slots" and
  // "experts.cache" (and released on destruction). Must outlive the
  // fetcher.
  io::MemoryAccountant* accountant = nullptr;
};

// Counters since creation (or ResetStats). Seconds are wall-clock.
struct FetchStats {
  uint64_t fetches = 0;            // Fetch calls
  uint64_t experts_requested = 0;  // keys over all Fetch calls
  uint64_t reads = 0;              // reads issued (demand + prefetch)
  uint64_t bytes_read = 0;         // bytes moved from disk (4 KiB-aligned)
  uint64_t run_bytes_read = 0;     // of which expert run bytes
  uint64_t cache_hits = 0;         // keys resident when requested
  uint64_t prefetch_issued = 0;
  uint64_t prefetch_hits = 0;       // keys whose prefetch read was used
  uint64_t prefetch_hit_bytes = 0;  // their bytes (4 KiB-aligned)
  uint64_t prefetch_wasted = 0;     // prefetched runs nobody asked for
  uint64_t prefetch_dropped = 0;    // hints with no free slot
  uint64_t checksums_verified = 0;
  // Of those, runs hashed with others on FetcherOptions::pool.
  uint64_t checksums_verified_together = 0;
  double fetch_seconds = 0;    // inside Fetch
  double io_wait_seconds = 0;  // blocked in BatchReader::WaitOne
  // Each read, from being queued to its completion being reaped.
  base::LatencyCounts read_latency;
  double compute_seconds = 0;  // inside on_ready
  double verify_seconds = 0;   // hashing runs
  // Of verify_seconds, prefetched runs hashed as they landed while a Fetch
  // waited for its own reads (overlapping the disk, not delaying compute).
  double early_verify_seconds = 0;

  double cache_hit_rate() const;     // cache_hits / experts_requested
  double prefetch_hit_rate() const;  // prefetch_hits / prefetch_issued
  std::string ToString() const;      // one line for logs
};

class ExpertFetcher {
 public:
  using ReadyFn =
      std::function<absl::Status(const ExpertKey& key, const uint8_t* run)>;

  // Opens every file of `index` once and allocates the slot buffers.
  // `index` must outlive the fetcher. Fails when a run lies past the end of
  // its file (naming both) or the accountant refuses the memory.
  static absl::StatusOr<std::unique_ptr<ExpertFetcher>> Create(
      const ExpertIndex* index, const FetcherOptions& options);
  ~ExpertFetcher();
  ExpertFetcher(const ExpertFetcher&) = delete;
  ExpertFetcher& operator=(const ExpertFetcher&) = delete;

  // Calls on_ready exactly once for each key (distinct, all in the index),
  // in completion order, with `run` pointing at the run's loc.length bytes;
  // the pointer is valid only during the call. Stops at the first error
  // (read failure, checksum mismatch, or on_ready's own), naming the expert,
  // file and offset.
  // `lookahead` (optional): keys predicted for a later Fetch, read into
  // free slots once this Fetch's own reads are issued (see above).
  absl::Status Fetch(const std::vector<ExpertKey>& keys,
                     const ReadyFn& on_ready,
                     const std::vector<ExpertKey>* lookahead = nullptr);

  // Starts reads of keys not yet resident or reading into free slots now
  // (see Lookahead above). Keys must be in the index. Never blocks on I/O.
  absl::Status Prefetch(const std::vector<ExpertKey>& keys);

  const FetchStats& stats() const { return stats_; }
  void ResetStats() { stats_ = FetchStats(); }
  int slots() const { return options_.slots; }
  int cache_slots() const { return options_.cache_slots; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  // Slot memory: (slots + cache_slots) * slot_bytes.
  uint64_t buffer_bytes() const;
  size_t cached_experts() const { return cached_count_; }
  const char* reader_name() const { return reader_->name(); }
  // True when every expert file was opened with O_DIRECT.
  bool all_direct() const { return all_direct_; }

 private:
  enum class SlotState { kFree, kReading, kLanded };
  struct Slot {
    uint8_t* data = nullptr;  // slot_bytes_ of arena_, fixed at Init
    SlotState state = SlotState::kFree;
    ExpertKey key;
    const ExpertLocation* loc = nullptr;
    uint64_t skip = 0;         // run starts at data + skip
    bool prefetch = false;     // prefetched and not yet used by a Fetch
    bool orphan = false;       // prefetch the current Fetch dropped; reading
    absl::Status read_status;  // of the landed read
    bool wanted = false;       // requested by the Fetch in progress
    bool cached = false;       // resident cache entry (landed, verified)
    bool verified = false;     // checksum checked (or none to check)
    uint64_t last_use = 0;     // LRU tick
    std::chrono::steady_clock::time_point queued;  // its read was queued
  };

  ExpertFetcher(const ExpertIndex* index, const FetcherOptions& options)
      : index_(index), options_(options) {}
  absl::Status Init();

  // Takes a free slot, or (when `evict`) the least recently used landed
  // cached or prefetched run no one is waiting for; -1 when none.
  int TakeSlot(bool evict);
  void FreeSlot(int s);
  // Starts reads for misses_[next_miss_..] while slots are available; once
  // all are issued, lookahead_[next_lookahead_..] into free slots.
  absl::Status IssueMisses();
  // Queues prefetch reads of `keys` from `*next` on while free slots last.
  void QueuePrefetches(const std::vector<ExpertKey>& keys, size_t* next);
  // Appends a read of `key` into slot s to requests_.
  void QueueRead(int s, const ExpertKey& key, const ExpertLocation* loc,
                 bool prefetch);
  absl::Status SubmitQueued();
  // Verifies and hands a landed wanted slot to on_ready, then releases it.
  absl::Status Consume(int s, const ReadyFn& on_ready);
  // Waits for one read, gathers the others that have landed, routes them
  // (Land) and consumes the wanted ones (ConsumeReady).
  absl::Status WaitAndDispatch(const ReadyFn& on_ready);
  // Routes a finished read: a wanted run joins ready_, a dropped guess is
  // freed, a prefetch for another layer is kept (verified now).
  void Land(io::ReadCompletion c);
  // Lands every read that has finished, without blocking.
  absl::Status PollLanded();
  // Verifies ready_'s runs a pool's worth at a time, consuming each group.
  absl::Status ConsumeReady(const ReadyFn& on_ready);
  // Marks the fetcher broken by a reader failure; returns the error.
  absl::Status ReaderBroke(const absl::Status& status);
  absl::Status FetchLoop(const std::vector<ExpertKey>& keys,
                         const ReadyFn& on_ready,
                         const std::vector<ExpertKey>* lookahead);
  // Error path: drains every read in flight and forgets non-cached runs.
  absl::Status Abort(absl::Status status);
  absl::Status VerifyRun(const Slot& slot);
  // The error for a run whose checksum came out as `got` (OK when it
  // matches).
  absl::Status CheckRunSum(const Slot& slot, uint64_t got) const;
  // Verifies the unverified runs among the n landed slots `ready` at once,
  // on options_.pool when set.
  absl::Status VerifyLanded(const int* ready, size_t n);
  // Cache insertion after use (or freeing, with the cache off).
  void Release(int s);

  const ExpertIndex* const index_;
  const FetcherOptions options_;
  uint64_t slot_bytes_ = 0;
  bool all_direct_ = true;
  bool charged_ = false;         // slot memory charged to options_.accountant
  absl::Status broken_;          // set when the reader itself failed
  std::vector<io::File> files_;  // parallel to index_->files()
  // Every slot's buffer, in one allocation so that slots smaller than a
  // huge page still sit in 2 MiB pages (see io::AlignedBuffer).
  io::AlignedBuffer arena_;
  std::vector<Slot> slots_;
  // Slot of every key that is reading or landed.
  absl::flat_hash_map<uint64_t, int> where_;
  absl::flat_hash_map<uint64_t, int> seen_;  // duplicate check in Fetch
  size_t cached_count_ = 0;
  uint64_t tick_ = 0;
  // Per-Fetch work lists (members so steady state does not allocate).
  std::vector<std::pair<ExpertKey, const ExpertLocation*>> misses_;
  size_t next_miss_ = 0;
  size_t wanted_in_flight_ = 0;
  // Prefetches of this Fetch's layers that it did not ask for, reading.
  size_t orphans_in_flight_ = 0;
  std::vector<int32_t> fetch_layers_;  // distinct layers of the Fetch
  const std::vector<ExpertKey>* lookahead_ = nullptr;
  size_t next_lookahead_ = 0;
  std::vector<int> ready_;      // landed wanted slots not yet consumed
  std::vector<int> to_verify_;  // VerifyLanded's scratch
  std::vector<uint64_t> sums_;  // its checksums, parallel to to_verify_
  std::vector<io::ReadRequest> requests_;
  FetchStats stats_;
  // Declared last: destroyed first, draining reads into slots_ and files_.
  std::unique_ptr<io::BatchReader> reader_;
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_FETCHER_H_
