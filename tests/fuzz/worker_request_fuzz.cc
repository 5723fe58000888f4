// The expert worker's ComputeRequest handling on ckpt_A (tests/fixtures):
// the bytes a coordinator (or anyone) sends, parsed as the gRPC layer
// does, validated and admitted against the worker's --mem, and run when
// admitted, as flotilla-expert-worker does for every call.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "expert-worker/compute_rpc.h"
#include "expert-worker/expert_compute.h"
#include "expert-worker/shard_plan.h"

namespace {

flotilla::expert_worker::ExpertCompute* Compute() {
  static flotilla::expert_worker::ExpertCompute* compute = [] {
    flotilla::expert_worker::PlanOptions o;
    o.model_dir = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";
    o.shard = {0, 2};
    o.shard_given = true;
    o.memory_budget_bytes = uint64_t{256} << 20;
    o.compute_threads = 1;
    auto plan = flotilla::expert_worker::BuildShardPlan(o);
    if (!plan.ok()) std::abort();
    flotilla::expert_worker::ComputeOptions co;
    co.fetch_slots = 4;
    auto c = flotilla::expert_worker::ExpertCompute::Create(*plan, co);
    if (!c.ok()) std::abort();
    return c->release();
  }();
  return compute;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flotilla::v1::ComputeRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  flotilla::expert_worker::AdmittedCompute admitted;
  const grpc::Status admit = flotilla::expert_worker::AdmitCompute(
      Compute(), request, flotilla::expert_worker::RpcClock::now(), &admitted);
  if (!admit.ok()) return 0;
  flotilla::v1::ComputeResponse response;
  (void)flotilla::expert_worker::RunAdmittedCompute(Compute(), request,
                                                    admitted, &response);
  return 0;
}
