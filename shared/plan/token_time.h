// Predicted seconds per decoded token: the memory plan's reads at the disk's
// rates, and the token's compute at this machine's kernel rates
// (compute_probe.h), combined the way the streaming engine overlaps them.
//
// The overlap model. The trunk ring reads layers ahead of the forward pass,
// so trunk reads hide behind compute and compute behind trunk reads; but
// the disk serves trunk and expert reads one after the other. A layer's
// routed experts are read from the start of its attention (the router's
// guess, see docs/streaming.md), so those reads hide behind the layer's
// dense (bf16) compute before the routed experts are needed (attention,
// router, latent_down); what they take beyond it is exposed. A wrong guess
// costs twice: the guessed run was read for nothing, and the routed one is
// read after routing, alone, with nothing left to hide behind. Hence
//   t = max(disk, compute + max(0, guessed reads - overlap) + miss reads)
// with disk = trunk reads + expert reads (guesses included). Checked
// against runs of k3-bench at 1G, 2G and 4G (bench/predict_check.sh).
//
// Checksums. Expert runs are hashed on the forward pass's thread before
// use (serial: part of compute; prefetches that land while a step waits
// are hashed then, which this model does not credit). Trunk regions are
// hashed by the ring's verifier thread as they land, beside the forward
// pass: that work needs spare cycles, not time on the compute path, so it
// bounds the token only through the CPU it takes,
//   t >= compute + trunk checksums / threads  and  t >= trunk checksums
// (the verifier is one thread).
#ifndef FLOTILLA_SHARED_PLAN_TOKEN_TIME_H_
#define FLOTILLA_SHARED_PLAN_TOKEN_TIME_H_

#include <string>

#include "shared/model/model_shape.h"
#include "shared/plan/memory_plan.h"

namespace flotilla::plan {

// Measured by MeasureComputeRates (compute_probe.h).
struct ComputeRates {
  int threads = 1;
  // Weight bytes per second of one-token matvecs, on `threads` threads.
  double bf16_bytes_per_s = 0;  // trunk weights (kernels::MatMul, bf16)
  // Expert weights in the model's expert format (ModelShape::
  // expert_format; the name is from Kimi K3's MXFP4: packed + scale bytes).
  double mxfp4_bytes_per_s = 0;
  // Recurrent-state steps per second, one head each (Kimi K3's KDA; single
  // thread, as the engine runs it).
  double kda_head_steps_per_s = 0;
  // Decode attention: one head against one cached position (scores, then
  // the weighted sum, at the model's key and value widths) per second on
  // one thread; the engine spreads heads over its threads.
  double mla_head_positions_per_s = 0;
  double checksum_bytes_per_s = 0;  // XXH3 of streamed trunk and experts
  // Share of the trunk matvec time a MoE layer spends before it needs its
  // routed experts (attention, router, latent_down): the window their
  // guessed reads hide behind.
  double expert_overlap_fraction = 1;

  std::string ToString() const;
};

struct TokenTimeOptions {
  ComputeRates rates;
  double trunk_read_bytes_per_s = 0;   // trunk/vocab reads, engine pattern
  double expert_read_bytes_per_s = 0;  // expert-run reads, many in flight
  // One expert read alone (QD1): the reads after a wrong guess, a few per
  // layer. 0: expert_read_bytes_per_s.
  double single_read_bytes_per_s = 0;
  int positions = 256;           // cached positions attention sees
  bool verify_checksums = true;  // streamed bytes are checksummed
  // Share of routed experts the prefetch guess misses: 0.11 on k3-bench
  // (164.2 of 184 per token, generate --stats
  // expert_prefetch_hits_per_token), the figure used when nothing better
  // is known.
  double prefetch_miss_fraction = 0.11;
  // Routed experts computed here (false: on expert workers, whose time
  // this prediction does not include).
  bool local_experts = true;
  // A speculative pass (docs/speculative.md): `rows` tokens in one forward.
  // The trunk is read once and rates.bf16_bytes_per_s must be the rate at
  // that many rows; each row computes its own routed experts and attention;
  // the experts read are the union of the rows' (expert_union times one
  // row's, ExpertUnion). The prediction is then per pass.
  int rows = 1;
  double expert_union = 1;
};

// Distinct experts `rows` tokens route to in a layer, relative to one
// token's top_k, when each picks top_k of `experts` independently and
// uniformly (a flat router such as Kimi K3's): experts (1 - (1 - k/E)^rows)
// / k. 1 for one row; at most rows.
double ExpertUnion(int experts, int top_k, int rows);

struct TokenTime {
  double trunk_read_s = 0;
  double expert_read_s = 0;  // routed runs and wrong guesses
  double miss_read_s = 0;    // the routed runs the guess missed
  double bf16_s = 0;         // trunk layers + lm_head matvecs
  double mxfp4_s = 0;        // routed experts
  double attention_s = 0;    // KDA steps + MLA positions
  // Checksums of expert runs, on the compute path: those guessed right
  // hashed together over the threads, misses and wrong guesses one by one.
  double verify_s = 0;
  // Trunk checksums on the ring's verifier thread: its CPU seconds, which
  // overlap the disk and the forward pass (see the top of this file).
  double trunk_verify_cpu_s = 0;
  // Those CPU seconds spread over the compute threads, as wall seconds.
  double trunk_verify_s = 0;
  double seconds = 0;  // the prediction

  double disk_s() const { return trunk_read_s + expert_read_s; }
  double compute_s() const { return bf16_s + mxfp4_s + attention_s + verify_s; }
  // "0.31 s/token (compute 0.22 s: ..., disk 0.12 s: ...)".
  std::string ToString() const;
};

TokenTime PredictTokenTime(const model::ModelShape& shape,
                           const MemoryPlan& plan,
                           const TokenTimeOptions& options);

}  // namespace flotilla::plan

#endif  // FLOTILLA_SHARED_PLAN_TOKEN_TIME_H_
