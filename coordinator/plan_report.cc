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
                                       double single_read_gbps, bool json) {
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
  t.positions = std::min(kPositions, o.max_context);
  t.verify_checksums = o.verify_checksums;
  t.local_experts = o.workers.empty();
  const plan::TokenTime time = plan::PredictTokenTime(shape, plan, t);
  if (json) {
    nlohmann::json j = nlohmann::json::parse(plan.ToJson());
    j["family"] = config->family().name;
    j["predicted_seconds_per_token"] = time.seconds;
    j["predicted"] = {{"compute_s", time.compute_s()},
                      {"bf16_s", time.bf16_s},
                      {"experts_s", time.mxfp4_s},
                      {"attention_s", time.attention_s},
                      {"checksum_s", time.verify_s},
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
    return j.dump() + "\n";
  }
  return absl::StrFormat(
      "model family: %s\n%s  compute rates here: %s\n"
      "  predicted time per token (%d positions, trunk reads at %.2f GB/s, "
      "experts at %.2f GB/s, lone expert reads at %.2f GB/s%s): %s\n",
      config->family().name, plan.ToString(), t.rates.ToString(), t.positions,
      o.disk_gbps, expert_disk_gbps, single_read_gbps,
      t.local_experts ? "" : "; routed experts on the workers, not counted",
      time.ToString());
}

}  // namespace flotilla::coordinator
