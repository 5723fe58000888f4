#include "coordinator/remote/fake_fleet.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::testing {

FakeFleet::FakeFleet(const model::MoeSpec& config, std::string fingerprint,
                     std::vector<std::set<std::pair<int, int>>> owned)
    : config_(config),
      fingerprints_(owned.size(), fingerprint),
      owned_(std::move(owned)),
      behaviour_(new std::atomic<WorkerBehaviour>[owned_.size()]),
      requests_(owned_.size()),
      hints_(owned_.size()) {
  for (size_t w = 0; w < owned_.size(); ++w) {
    behaviour_[w] = WorkerBehaviour::kAnswer;
  }
}

absl::StatusOr<v1::InfoResponse> FakeFleet::Info(int w, int /*deadline_ms*/) {
  if (behaviour_[w] == WorkerBehaviour::kDown) {
    return absl::UnavailableError("failed to connect: Connection refused");
  }
  v1::InfoResponse info;
  info.set_worker_version("fake");
  info.set_model_fingerprint(fingerprints_[w]);
  info.set_shard_index(w);
  info.set_shard_count(static_cast<uint32_t>(owned_.size()));
  info.set_num_layers(config_.num_layers);
  info.set_num_experts(config_.num_experts);
  info.set_row_width(config_.hidden_size);
  info.set_max_request_bytes(max_request_bytes_);
  for (const auto& [layer, expert] : owned_[w]) {
    (*info.mutable_owned_experts())[layer].add_experts(expert);
  }
  return info;
}

std::vector<absl::StatusOr<v1::InfoResponse>> FakeFleet::InfoAll(
    int deadline_ms, bool /*wait_for_ready*/) {
  std::vector<absl::StatusOr<v1::InfoResponse>> out;
  for (size_t w = 0; w < owned_.size(); ++w) {
    out.push_back(Info(static_cast<int>(w), deadline_ms));
  }
  return out;
}

void FakeFleet::StartCompute(ComputeCall* call, int /*deadline_ms*/) {
  call->sent = RemoteClock::now();
  started_.push_back(call);
}

void FakeFleet::AwaitComputes() {
  for (ComputeCall* call : started_) {
    Answer(call);
    call->answered = RemoteClock::now();
  }
  started_.clear();
}

void FakeFleet::Answer(ComputeCall* call) {
  const int w = call->worker;
  const v1::ComputeRequest& q = call->request;
  requests_[w].push_back(q);
  switch (behaviour_[w]) {
    case WorkerBehaviour::kDown:
      call->status = absl::UnavailableError("Connection refused");
      return;
    case WorkerBehaviour::kReject:
      call->status = absl::InvalidArgumentError("row_width 63 != 64");
      return;
    case WorkerBehaviour::kCorrupt:
      call->status = absl::DataLossError(
          absl::StrCat("checksum mismatch for layer ", q.layer(),
                       " expert 0 in /shard/model.safetensors at offset 4096"));
      return;
    default:
      break;
  }
  const size_t width = q.row_width();
  v1::ComputeResponse& r = call->response;
  r.set_layer(q.layer());
  r.set_step_id(q.step_id());
  r.set_row_width(q.row_width());
  std::map<uint32_t, std::vector<double>> sums;  // row -> double sums
  for (const v1::Assignment& a : q.assignments()) {
    if (!owned_[w].count(
            {static_cast<int>(q.layer()), static_cast<int>(a.expert())})) {
      call->status = absl::InvalidArgumentError(
          absl::StrCat("expert ", a.expert(), " is not this worker's"));
      return;
    }
    const float* x = q.activations().data() + a.row() * width;
    std::vector<double>& acc = sums[a.row()];
    acc.resize(width, 0.0);
    for (size_t j = 0; j < width; ++j) {
      const float y = ToyExpert(q.layer(), a.expert(), x[j]);
      if (q.output() == v1::OUTPUT_KIND_EXPERT_OUTPUTS) {
        r.add_expert_outputs(y);
      }
      acc[j] += static_cast<double>(a.weight()) * y;
    }
  }
  if (q.output() == v1::OUTPUT_KIND_ROW_SUMS) {
    for (const auto& [row, acc] : sums) {
      r.add_rows(row);
      for (double v : acc) r.add_row_sums(v);
    }
  }
  if (behaviour_[w] == WorkerBehaviour::kShortAnswer) {
    if (r.expert_outputs_size() > 0) r.mutable_expert_outputs()->RemoveLast();
    if (r.row_sums_size() > 0) r.mutable_row_sums()->RemoveLast();
  }
  r.mutable_stats()->set_bytes_read(1000 * q.assignments_size());
  r.mutable_stats()->set_experts_computed(q.assignments_size());
  call->status = absl::OkStatus();
}

void FakeFleet::SendPrefetch(int w, const v1::PrefetchRequest& request,
                             int /*deadline_ms*/) {
  hints_[w].push_back(request);
  if (behaviour_[w] == WorkerBehaviour::kAnswer) {
    tally_.scheduled += request.experts_size();
  } else {
    ++tally_.failed;
  }
}

}  // namespace flotilla::coordinator::testing
