#include "coordinator/plan_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/plan/compute_probe.h"
#include "shared/plan/token_time.h"

namespace flotilla::coordinator {
namespace {

// Long enough for steady rates, short enough that --plan stays interactive
// (5 probes: ~1.5 s).
constexpr double kProbeSeconds = 0.3;
constexpr int kPositions = 256;

}  // namespace

absl::StatusOr<std::string> PlanReport(const EngineOptions& o,
                                       double expert_disk_gbps,
                                       double single_read_gbps, bool json,
                                       const SpeculationPlan& spec) {
  std::unique_ptr<family::FamilyConfig> config;
  FLOTILLA_ASSIGN_OR_RETURN(plan::MemoryPlan plan, PlanEngine(o, &config));
  const model::ModelShape shape = config->Shape();
  plan::TokenTimeOptions t;
  FLOTILLA_ASSIGN_OR_RETURN(
      t.rates,
      plan::MeasureComputeRates(shape, std::max(1, o.threads), kProbeSeconds));
  t.trunk_read_bytes_per_s = o.disk_gbps * 1e9;
  t.expert_read_bytes_per_s = expert_disk_gbps * 1e9;
  t.single_read_bytes_per_s = single_read_gbps * 1e9;
  t.positions =
      o.max_context > 0 ? std::min(kPositions, o.max_context) : kPositions;
  t.verify_checksums = o.verify_checksums;
  t.local_experts = o.workers.empty();
  const plan::TokenTime time = plan::PredictTokenTime(shape, plan, t);
  // A speculative pass: guesses + 1 rows, trunk read once at the rows'
  // matvec rate, the union of their experts read, each row's computed.
  plan::TokenTime pass;
  plan::TokenTimeOptions ts = t;
  if (spec.guesses > 0) {
    ts.rows = spec.guesses + 1;
    ts.expert_union =
        plan::ExpertUnion(shape.num_experts, shape.experts_per_token, ts.rows);
    FLOTILLA_ASSIGN_OR_RETURN(
        ts.rates.bf16_bytes_per_s,
        plan::MeasureTrunkRateAtRows(shape, std::max(1, o.threads), ts.rows,
                                     2 * kProbeSeconds));
    pass = plan::PredictTokenTime(shape, plan, ts);
  }
  const double spec_seconds = pass.seconds / spec.tokens_per_pass;
  if (json) {
    nlohmann::json j = nlohmann::json::parse(plan.ToJson());
    j["family"] = config->family().name;
    j["predicted_seconds_per_token"] = time.seconds;
    j["predicted"] = {{"compute_s", time.compute_s()},
                      {"bf16_s", time.bf16_s},
                      {"experts_s", time.mxfp4_s},
                      {"attention_s", time.attention_s},
                      {"checksum_s", time.verify_s},
                      {"trunk_checksum_cpu_s", time.trunk_verify_cpu_s},
                      {"trunk_checksum_s", time.trunk_verify_s},
                      {"disk_s", time.disk_s()},
                      {"trunk_read_s", time.trunk_read_s},
                      {"expert_read_s", time.expert_read_s},
                      {"positions", t.positions},
                      {"miss_read_s", time.miss_read_s},
                      {"expert_disk_bytes_per_second", expert_disk_gbps * 1e9},
                      {"single_read_bytes_per_second", single_read_gbps * 1e9}};
    j["compute_rates"] = {
        {"threads", t.rates.threads},
        {"bf16_bytes_per_s", t.rates.bf16_bytes_per_s},
        {"mxfp4_bytes_per_s", t.rates.mxfp4_bytes_per_s},
        {"kda_head_steps_per_s", t.rates.kda_head_steps_per_s},
        {"mla_head_positions_per_s", t.rates.mla_head_positions_per_s},
        {"checksum_bytes_per_s", t.rates.checksum_bytes_per_s},
        {"expert_overlap_fraction", t.rates.expert_overlap_fraction}};
    if (spec.guesses > 0) {
      j["speculative"] = {
          {"guesses_per_pass", spec.guesses},
          {"tokens_per_pass", spec.tokens_per_pass},
          {"predicted_seconds_per_token", spec_seconds},
          {"pass_seconds", pass.seconds},
          {"pass_compute_s", pass.compute_s()},
          {"pass_disk_s", pass.disk_s()},
          {"expert_union", ts.expert_union},
          {"trunk_bytes_per_s_at_rows", ts.rates.bf16_bytes_per_s}};
    }
    return j.dump() + "\n";
  }
  std::string speculative;
  if (spec.guesses > 0) {
    speculative = absl::StrFormat(
        "  speculative, %d guesses per pass yielding %.2f tokens: %.3g "
        "s/token (a pass: %s; its %d rows read the union of their experts, "
        "%.2fx one token's, and the trunk at %.2f GB/s of matvec)\n",
        spec.guesses, spec.tokens_per_pass, spec_seconds, pass.ToString(),
        ts.rows, ts.expert_union, ts.rates.bf16_bytes_per_s / 1e9);
  }
  return absl::StrFormat(
      "model family: %s\n%s  compute rates here: %s\n"
      "  predicted time per token (%d positions, trunk reads at %.2f GB/s, "
      "experts at %.2f GB/s, lone expert reads at %.2f GB/s%s): %s\n%s",
      config->family().name, plan.ToString(), t.rates.ToString(), t.positions,
      o.disk_gbps, expert_disk_gbps, single_read_gbps,
      t.local_experts ? "" : "; routed experts on the workers, not counted",
      time.ToString(), speculative);
}

}  // namespace flotilla::coordinator
