// StreamingExperts: the coordinator's ExpertBackend for running within a
// memory budget. Routed experts are not held in memory: each MoE layer's
// distinct experts are read from NVMe (io_uring or a pread pool, O_DIRECT,
// all reads issued at once) into a fixed pool of slot buffers and computed
// as their bytes land (shared/experts/ExpertEngine). Results are bitwise
// identical to LocalExperts whatever the slot count, reader, cache or
// lookahead, because each expert's rows are computed with the same kernels
// and the per-row combine runs in task order in double, rounded once.
//
// Experts are located either in place in the checkpoint's safetensors shards
// (each expert one contiguous run, as in the real K3 release) or through a
// `flotilla-tool pack` manifest, whose per-run checksums are then verified
// before use.
//
// Lookahead: with options.lookahead, the forward pass calls
// PrefetchLayer(layer, guess) before the layer's attention; the guessed
// runs are read at once into free slots (the disk is otherwise idle while
// attention computes) and the layer's ComputeLayer uses those that it
// routed to (prefetch_hits); the rest are dropped (prefetch_wasted).
// Without options.lookahead it is a no-op.
//
// Thread-compatibility: one thread at a time (the forward pass). `pool`
// (may be null) must outlive the backend.
#ifndef FLOTILLA_COORDINATOR_STREAM_STREAMING_EXPERTS_H_
#define FLOTILLA_COORDINATOR_STREAM_STREAMING_EXPERTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/expert_backend.h"
#include "shared/experts/expert_engine.h"
#include "shared/io/batch_reader.h"
#include "shared/io/memory_budget.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/moe_spec.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::coordinator {

struct StreamingExpertsOptions {
  // Slot buffers for runs in flight / being computed (>= 1). One slot holds
  // one expert (17.5 MB for K3); top-k (16) lets a decode step's layer be
  // read in one go.
  int slots = 16;
  // Expert cache (0 = off): whole slots of resident runs, LRU.
  uint64_t cache_bytes = 0;
  int queue_depth = 32;  // BatchReader depth (io_uring entries / threads)
  io::ReaderKind reader = io::ReaderKind::kAuto;
  io::ReaderFactory reader_factory;  // empty: io::CreateBatchReader
  bool direct_io = true;             // O_DIRECT where the filesystem allows
  bool verify_checksums = true;      // where the index has checksums (packs)
  bool lookahead = false;            // honour HintNextLayer / PrefetchNow
  bool prefault = true;              // fault slot pages in at start
  int only_layer = -1;               // index only this MoE layer (tests)
  // Charged with the slot and cache memory when set; must outlive us.
  io::MemoryAccountant* accountant = nullptr;
};

class StreamingExperts : public ExpertBackend {
 public:
  // Experts from `manifest` when non-null (files resolved against model_dir
  // or pack_dir, see pack::PackManifest), else from the safetensors headers in
  // model_dir (only the headers are read here).
  static absl::StatusOr<std::unique_ptr<StreamingExperts>> Create(
      const std::string& model_dir, const model::MoeSpec& config,
      const pack::PackManifest* manifest, const std::string& pack_dir,
      kernels::ThreadPool* pool, const StreamingExpertsOptions& options);

  // From a ready index (tests, tools).
  static absl::StatusOr<std::unique_ptr<StreamingExperts>> FromIndex(
      experts::ExpertIndex index, const model::MoeSpec& config,
      kernels::ThreadPool* pool, const StreamingExpertsOptions& options);

  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const std::vector<ExpertTask>& tasks,
                            float* out) override;

  // Predicted experts of `layer` (see the header comment): reads start now
  // into free slots; never blocks on I/O; unknown experts are ignored (a
  // wrong guess is never an error).
  absl::Status PrefetchLayer(int layer,
                             const std::vector<int>& experts) override;

  // The backend-neutral summary (--stats).
  ExpertBackendStats backend_stats() const override;
  // Every counter of the fetcher (reads, hits, waste, timings).
  const experts::FetchStats& stats() const { return engine_->stats(); }
  void ResetStats() { engine_->fetcher().ResetStats(); }
  // Bytes of expert data read from disk so far (4 KiB-aligned reads).
  uint64_t bytes_read() const { return stats().bytes_read; }
  // Multi-line summary: reader, O_DIRECT, slots, cache, then the counters.
  std::string StatsReport() const;
  experts::ExpertEngine& engine() { return *engine_; }

 private:
  StreamingExperts(std::unique_ptr<experts::ExpertEngine> engine,
                   bool lookahead)
      : engine_(std::move(engine)), lookahead_enabled_(lookahead) {}

  // Keys of `experts` in `layer` that the index holds.
  std::vector<experts::ExpertKey> KnownKeys(
      int layer, const std::vector<int>& experts) const;

  std::unique_ptr<experts::ExpertEngine> engine_;
  const bool lookahead_enabled_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_STREAM_STREAMING_EXPERTS_H_
