#include "expert-worker/compute_rpc.h"

#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "expert-worker/server.h"
#include "shared/base/elapsed.h"

namespace flotilla::expert_worker {
namespace {

// Bytes of a parsed request besides the activations it lends to the call:
// its wire copy and the assignment messages.
uint64_t RequestBytes(const v1::ComputeRequest& request) {
  return request.ByteSizeLong() +
         static_cast<uint64_t>(request.activations_size()) * sizeof(float) +
         static_cast<uint64_t>(request.assignments_size()) *
             (sizeof(v1::Assignment) + sizeof(void*));
}

// Converts the request into a ComputeCall (no copy of the activations).
// False with `error` set when an index does not fit the engine's int32.
bool ToCall(const v1::ComputeRequest& request, ComputeCall* call,
            std::string* error) {
  call->layer = request.layer();
  call->row_width = request.row_width();
  call->num_rows = request.num_rows();
  call->activations = request.activations().data();
  call->activations_size = static_cast<uint64_t>(request.activations_size());
  switch (request.output()) {
    case v1::OUTPUT_KIND_ROW_SUMS:
      call->kind = CallKind::kRowSums;
      break;
    case v1::OUTPUT_KIND_EXPERT_OUTPUTS:
      call->kind = CallKind::kExpertOutputs;
      break;
    case v1::OUTPUT_KIND_GATE_UP_SLICE:
      call->kind = CallKind::kGateUpSlice;
      break;
    case v1::OUTPUT_KIND_DOWN_SLICE:
      call->kind = CallKind::kDownSlice;
      break;
    default:
      *error = absl::StrCat("unknown output kind ", request.output());
      return false;
  }
  if (request.assignments_size() > static_cast<int>(kMaxAssignmentsPerCall)) {
    *error = absl::StrCat(request.assignments_size(),
                          " assignments (must be in [1, ",
                          kMaxAssignmentsPerCall, "])");
    return false;
  }
  call->assignments.resize(request.assignments_size());
  constexpr uint32_t kMax = std::numeric_limits<int32_t>::max();
  for (int i = 0; i < request.assignments_size(); ++i) {
    const v1::Assignment& a = request.assignments(i);
    if (a.row() > kMax || a.expert() > kMax) {
      *error = absl::StrCat("assignment ", i, ": row ", a.row(), " / expert ",
                            a.expert(), " out of range");
      return false;
    }
    call->assignments[i] =
        experts::ExpertAssignment{static_cast<int32_t>(a.row()),
                                  static_cast<int32_t>(a.expert()), a.weight()};
  }
  return true;
}

}  // namespace

grpc::Status AdmitCompute(ExpertCompute* compute,
                          const v1::ComputeRequest& request,
                          RpcClock::time_point received,
                          AdmittedCompute* admitted) {
  admitted->received = received;
  std::string error;
  if (!ToCall(request, &admitted->call, &error)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, error);
  }
  absl::StatusOr<ComputeShape> shape = compute->Validate(admitted->call);
  if (!shape.ok()) return transport::ToGrpcStatus(shape.status());
  admitted->shape = std::move(*shape);
  // Everything the call holds until it is answered, charged before it runs
  // or is queued: a call the budget cannot take is refused, not run.
  io::MemoryAccountant& a = compute->accountant();
  const uint64_t bytes = RequestBytes(request) +
                         compute->CallBytes(admitted->call, admitted->shape);
  if (!a.Charge(kCallsOwner, bytes).ok()) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("layer ", admitted->call.layer, ": the call needs ", bytes,
                     " bytes (request, response and scratch) but only ",
                     a.available(), " of the worker's ", a.budget(),
                     "-byte --mem budget are left; send smaller calls "
                     "(fewer rows) or give the worker more --mem"));
  }
  admitted->charge = std::make_unique<CallCharge>(&a, bytes);
  return grpc::Status::OK;
}

grpc::Status RunAdmittedCompute(ExpertCompute* compute,
                                const v1::ComputeRequest& request,
                                const AdmittedCompute& admitted,
                                v1::ComputeResponse* response) {
  const RpcClock::time_point start = RpcClock::now();
  const ComputeCall& call = admitted.call;
  const ComputeShape& shape = admitted.shape;
  response->set_layer(request.layer());
  response->set_step_id(request.step_id());
  response->set_row_width(request.row_width());
  float* outputs = nullptr;
  double* sums = nullptr;
  if (call.kind == CallKind::kExpertOutputs) {
    response->mutable_expert_outputs()->Resize(
        static_cast<int>(shape.output_floats), 0.0f);
    outputs = response->mutable_expert_outputs()->mutable_data();
  } else if (call.kind != CallKind::kRowSums) {
    response->mutable_slice_outputs()->Resize(
        static_cast<int>(shape.output_floats), 0.0f);
    outputs = response->mutable_slice_outputs()->mutable_data();
  } else {
    response->mutable_rows()->Add(shape.rows.begin(), shape.rows.end());
    response->mutable_row_sums()->Resize(static_cast<int>(shape.output_doubles),
                                         0.0);
    sums = response->mutable_row_sums()->mutable_data();
  }
  ComputeCallStats stats;
  const absl::Status status = compute->Run(call, shape, outputs, sums, &stats);
  if (!status.ok()) {
    response->Clear();
    const absl::Status named(
        status.code(),
        absl::StrCat("layer ", call.layer, ": ", status.message()));
    // The request was valid and this worker could not serve it (a corrupt
    // or unreadable file): the operator must see it here, not only in the
    // coordinator that retried on a replica.
    std::fprintf(stderr, "flotilla-expert-worker: Compute failed: %s\n",
                 named.ToString().c_str());
    return transport::ToGrpcStatus(named);
  }
  v1::ComputeStats* s = response->mutable_stats();
  s->set_bytes_read(stats.bytes_read);
  s->set_read_seconds(stats.read_seconds);
  s->set_compute_seconds(stats.compute_seconds);
  s->set_cache_hits(stats.cache_hits);
  s->set_experts_computed(stats.experts_computed);
  s->set_prefetch_hits(stats.prefetch_hits);
  s->set_queue_seconds(base::Seconds(start - admitted.received));
  s->set_wall_seconds(base::Seconds(RpcClock::now() - admitted.received));
  return grpc::Status::OK;
}

grpc::Status AdmitPrefetch(const ExpertCompute& compute,
                           const v1::PrefetchRequest& request,
                           std::vector<uint32_t>* experts) {
  if (request.experts_size() > compute.plan().num_experts) {
    // Checked before copying: the count is bounded only by the message.
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("prefetch: ", request.experts_size(),
                     " experts, more than the ", compute.plan().num_experts,
                     " a layer has"));
  }
  experts->assign(request.experts().begin(), request.experts().end());
  return transport::ToGrpcStatus(
      compute.ValidatePrefetch(request.layer(), *experts));
}

v1::InfoResponse MakeInfo(const ExpertCompute& compute) {
  const ShardPlan& plan = compute.plan();
  v1::InfoResponse info;
  info.set_worker_version(kWorkerVersion);
  info.set_model_fingerprint(plan.model_fingerprint);
  info.set_shard_index(static_cast<uint32_t>(plan.shard.index));
  info.set_shard_count(static_cast<uint32_t>(plan.shard.count));
  for (const auto& [layer, experts] : plan.owned_experts) {
    v1::ExpertList& list =
        (*info.mutable_owned_experts())[static_cast<uint32_t>(layer)];
    list.mutable_experts()->Add(experts.begin(), experts.end());
    if (auto it = compute.source_checksums().find(layer);
        it != compute.source_checksums().end() &&
        it->second.size() == experts.size()) {
      list.mutable_checksums()->Add(it->second.begin(), it->second.end());
    }
  }
  info.set_num_layers(static_cast<uint32_t>(plan.num_layers));
  info.set_num_experts(static_cast<uint32_t>(plan.num_experts));
  info.set_row_width(static_cast<uint32_t>(plan.row_width));
  info.set_memory_budget_bytes(plan.memory_budget_bytes);
  info.set_compute_threads(static_cast<uint32_t>(plan.compute_threads));
  info.set_max_request_bytes(kMaxMessageBytes);
  info.set_replicas(static_cast<uint32_t>(plan.replicas));
  info.set_placement(plan.placement);
  info.set_fetch_slots(static_cast<uint32_t>(compute.options().fetch_slots));
  if (plan.split) {
    v1::ExpertSlice& slice = *info.mutable_split();
    slice.set_index(static_cast<uint32_t>(plan.split->worker));
    slice.set_count(static_cast<uint32_t>(plan.split->workers));
    slice.set_intermediate(static_cast<uint32_t>(plan.split->intermediate));
    slice.set_inter_begin(
        static_cast<uint32_t>(plan.split->inter_rows().begin));
    slice.set_inter_end(static_cast<uint32_t>(plan.split->inter_rows().end));
    slice.set_latent_begin(
        static_cast<uint32_t>(plan.split->latent_rows().begin));
    slice.set_latent_end(static_cast<uint32_t>(plan.split->latent_rows().end));
    slice.set_resident_experts(
        static_cast<uint32_t>(SplitResidentExperts(plan.config)));
  }
  return info;
}

}  // namespace flotilla::expert_worker
