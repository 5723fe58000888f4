#include "shared/plan/token_time.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace flotilla::plan {
namespace {

double Over(double amount, double rate) { return rate > 0 ? amount / rate : 0; }

}  // namespace

std::string ComputeRates::ToString() const {
  return absl::StrFormat(
      "trunk matvec %.2f GB/s, expert matvec %.2f GB/s (%d threads); "
      "recurrent step %.0f heads/s, attention %.1f M head-positions/s, "
      "checksum %.2f GB/s (1 thread)",
      bf16_bytes_per_s / 1e9, mxfp4_bytes_per_s / 1e9, threads,
      kda_head_steps_per_s, mla_head_positions_per_s / 1e6,
      checksum_bytes_per_s / 1e9);
}

std::string TokenTime::ToString() const {
  // Three significant digits: a small model's token takes microseconds.
  return absl::StrFormat(
      "%.3g s/token (compute %.3f s: trunk %.3f + experts %.3f + attention "
      "%.3f + expert checksums %.3f; trunk checksums %.3f s of CPU on the "
      "verifier thread, %.3f s of all threads, beside the forward pass; disk "
      "%.3f s: trunk %.3f + experts %.3f, of which %.3f after a wrong guess)",
      seconds, compute_s(), bf16_s, mxfp4_s, attention_s, verify_s,
      trunk_verify_cpu_s, trunk_verify_s, disk_s(), trunk_read_s, expert_read_s,
      miss_read_s);
}

double ExpertUnion(int experts, int top_k, int rows) {
  if (experts <= 0 || top_k <= 0 || rows <= 1) return 1;
  const double e = experts, k = std::min(top_k, experts);
  return e * (1 - std::pow(1 - k / e, rows)) / k;
}

TokenTime PredictTokenTime(const model::ModelShape& shape,
                           const MemoryPlan& plan, const TokenTimeOptions& o) {
  const ComputeRates& r = o.rates;
  TokenTime t;
  t.trunk_read_s =
      Over(static_cast<double>(plan.trunk_read_bytes + plan.lm_head_read_bytes +
                               plan.embed_read_bytes),
           o.trunk_read_bytes_per_s);
  t.bf16_s =
      Over(static_cast<double>(plan.trunk_layer_bytes + plan.lm_head_bytes),
           r.bf16_bytes_per_s);
  const double kda_steps =
      static_cast<double>(shape.recurrent_layers) * shape.recurrent_heads;
  const double mla_positions = static_cast<double>(shape.attention_layers) *
                               shape.attention_heads * std::max(1, o.positions);
  t.attention_s =
      Over(kda_steps, r.kda_head_steps_per_s) +
      Over(mla_positions, r.mla_head_positions_per_s * std::max(1, r.threads));
  const double rows = std::max(1, o.rows);
  t.attention_s *= rows;
  double hashed_together = 0, hashed_alone = 0;
  if (o.verify_checksums) {
    t.trunk_verify_cpu_s = Over(
        static_cast<double>(plan.trunk_read_bytes + plan.lm_head_read_bytes),
        r.checksum_bytes_per_s);
  }
  t.trunk_verify_s = t.trunk_verify_cpu_s / std::max(1, r.threads);
  double guessed_read_s = 0;
  if (o.local_experts) {
    const double routed =
        static_cast<double>(plan.expert_read_bytes) * o.expert_union;
    const double miss = std::clamp(o.prefetch_miss_fraction, 0.0, 1.0);
    t.expert_read_s = Over(routed * (1 + miss), o.expert_read_bytes_per_s);
    // top_k guesses per layer, right or wrong, read together.
    guessed_read_s = Over(routed, o.expert_read_bytes_per_s);
    t.miss_read_s = Over(routed * miss, o.single_read_bytes_per_s > 0
                                            ? o.single_read_bytes_per_s
                                            : o.expert_read_bytes_per_s);
    // Each row computes its own experts, however many rows share a read.
    t.mxfp4_s = Over(static_cast<double>(plan.expert_read_bytes) * rows,
                     r.mxfp4_bytes_per_s);
    if (o.verify_checksums) {
      // Runs guessed right land while other work runs and are hashed
      // together, one per thread (ExpertFetcher::VerifyLanded); the demand
      // read after a miss lands alone, and so is a wrong guess hashed as it
      // lands.
      hashed_together += routed * (1 - miss);
      hashed_alone += routed * miss * 2;
    }
  }
  t.verify_s =
      Over(hashed_together, r.checksum_bytes_per_s * std::max(1, r.threads)) +
      Over(hashed_alone, r.checksum_bytes_per_s);
  // See the header: guessed reads overlap the layer's dense compute before
  // its routed experts are needed, reads after a wrong guess nothing.
  const double overlap =
      t.bf16_s * std::clamp(r.expert_overlap_fraction, 0.0, 1.0);
  const double exposed =
      std::max(0.0, guessed_read_s - overlap) + t.miss_read_s;
  t.seconds =
      std::max({t.disk_s(), t.compute_s() + exposed,
                t.compute_s() + t.trunk_verify_s, t.trunk_verify_cpu_s});
  return t;
}

}  // namespace flotilla::plan
