// The memory plan: how a budget is split between pinned trunk layers, the
// trunk prefetch ring, expert read buffers, an optional expert cache, the
// per-sequence state (KDA state, MLA latent cache), the embedding and
// lm_head, the tokenizer and working buffers; and what that plan costs per
// token in bytes read and predicted seconds at a given disk bandwidth.
//
// Why pinned layers come first: every pinned trunk byte saves one byte read
// per token, while an expert cache below ~36 GB gives almost no true hits on
// K3 (896 experts, flat routing; measured by kimi-k3-in-c), so memory left
// after the minimum working set goes to the trunk prefix, then the lm_head,
// then the embedding; an expert cache only when asked for.
#ifndef FLOTILLA_SHARED_PLAN_MEMORY_PLAN_H_
#define FLOTILLA_SHARED_PLAN_MEMORY_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/model/model_shape.h"

namespace flotilla::plan {

struct PlanInputs {
  model::ModelShape shape;  // the family's figures (shared/family)
  uint64_t budget_bytes = 0;
  std::vector<uint64_t> layer_region_bytes;  // per layer, trunk regions
  uint64_t vocab_region_bytes = 0;           // embedding (= lm_head) region
  uint64_t vocab_chunk_bytes = 0;            // one verified chunk of rows
  uint64_t lm_head_stream_bytes = 0;  // pass buffers of a streamed lm_head
  uint64_t globals_bytes = 0;
  uint64_t expert_run_bytes = 0;  // largest expert run, 4 KiB-aligned + 4 KiB
  int max_context = 4096;         // positions each sequence's state holds
  // Sequences whose state is held at once (serve: --max-batch), each
  // charged for max_context positions, and the kept states of ended turns
  // (serve: --prefix-cache).
  int sequences = 1;
  uint64_t prefix_cache_bytes = 0;
  int prefill_chunk = 256;          // tokens per forward pass at most
  uint64_t expert_cache_bytes = 0;  // requested expert cache (0 = none)
  int expert_slots = 0;             // requested read buffers (0 = auto)
  uint64_t tokenizer_bytes = 0;
  // Resident bytes of the process before any model memory (code, libraries,
  // allocator): charged so the plan bounds the real peak RSS.
  uint64_t process_baseline_bytes = 0;
  // What the open model keeps to find its weights (the expert index, the
  // pack's region table), measured before the plan takes the baseline:
  // ~7 MB for K3's 93 x 896 experts.
  uint64_t metadata_bytes = 0;
  int max_pinned_layers = -1;          // cap on the pinned prefix (-1 = none)
  bool stream_vocab = false;           // never pin the embedding and lm_head
  double disk_bytes_per_second = 3e9;  // for the prediction
};

struct MemoryPlan {
  uint64_t budget_bytes = 0;
  int num_layers = 0;
  int pinned_layers = 0;  // layers [0, pinned_layers) stay resident
  int ring_slots = 0;     // 0 when every layer is pinned
  uint64_t ring_slot_bytes = 0;
  bool lm_head_pinned = false;
  bool embed_pinned = false;
  int expert_slots = 0;
  uint64_t expert_slot_bytes = 0;
  int expert_cache_slots = 0;
  // (owner, bytes) in the order they are charged.
  std::vector<std::pair<std::string, uint64_t>> charges;
  uint64_t total_bytes = 0;
  // Weights every decoded token computes with: all layer regions and the
  // lm_head (whether pinned or streamed).
  uint64_t trunk_layer_bytes = 0;
  uint64_t lm_head_bytes = 0;
  // Per decoded token, uncached.
  uint64_t trunk_read_bytes = 0;
  uint64_t lm_head_read_bytes = 0;
  uint64_t embed_read_bytes = 0;
  uint64_t expert_read_bytes = 0;
  double disk_bytes_per_second = 0;

  // The charges that are resident once the model is open: all but the
  // sequence state, the workspace and the prefix cache, which fill as
  // requests run. The measured RSS after open should match it.
  uint64_t open_bytes() const;

  uint64_t read_bytes_per_token() const {
    return trunk_read_bytes + lm_head_read_bytes + embed_read_bytes +
           expert_read_bytes;
  }
  // I/O time per decoded token at disk_bytes_per_second (a lower bound
  // when I/O-bound; compute overlaps with it).
  double predicted_io_seconds_per_token() const;
  std::string ToString() const;
  std::string ToJson() const;
};

// ResourceExhausted, with the minimum needed and its breakdown, when even
// the smallest working set does not fit.
absl::StatusOr<MemoryPlan> MakeMemoryPlan(const PlanInputs& inputs);

// A streamed lm_head (coordinator/stream/vocab_stream.h) reads it in passes
// of whole checksum chunks (`chunk_rows` rows), about `pass_bytes` each and
// at most the vocabulary, into two buffers that each hold a pass read with
// O_DIRECT from any offset. Here so the coordinator and doctor charge the
// same bytes.
inline constexpr uint64_t kLmHeadPassBytes = uint64_t{16} << 20;
uint64_t LmHeadPassRows(uint64_t vocab, uint64_t row_bytes, uint64_t chunk_rows,
                        uint64_t pass_bytes);
// `rows` rows read with O_DIRECT from any file offset: the aligned range
// starts up to 4 KiB before the first row.
uint64_t RowSpanBytes(uint64_t rows, uint64_t row_bytes);
uint64_t LmHeadPassBufferBytes(uint64_t vocab, uint64_t row_bytes,
                               uint64_t chunk_rows, uint64_t pass_bytes);

}  // namespace flotilla::plan

#endif  // FLOTILLA_SHARED_PLAN_MEMORY_PLAN_H_
