// RemoteExperts::ComputeLayer: deal a layer's experts to workers, send one
// call per worker (all at once), retry failed workers' experts on replicas,
// and combine the results in a fixed order (see remote_experts.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/remote/remote_experts_internal.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"
#include "shared/experts/combine.h"

namespace flotilla::coordinator {
namespace {

// One Compute RPC: part (or all) of one worker's share of the layer.
struct Call : ComputeTag {
  int worker = 0;
  std::vector<int> tasks;  // indices into the layer's tasks, in task order
  std::vector<int> rows;   // global rows, ascending; request row k = rows[k]
  v1::ComputeRequest request;
  v1::ComputeResponse response;
  grpc::ClientContext context;
  grpc::Status status;
  bool ok = false;  // succeeded and passed CheckResponse
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ComputeResponse>> reader;
};

using base::Seconds;

// Checks a response against its request (never trust the network).
absl::Status CheckResponse(const Call& c, size_t width, bool row_sums) {
  const v1::ComputeResponse& r = c.response;
  if (!row_sums) {
    if (static_cast<size_t>(r.expert_outputs_size()) !=
        c.tasks.size() * width) {
      return absl::DataLossError(absl::StrCat(
          "returned ", r.expert_outputs_size(), " output floats for ",
          c.tasks.size(), " tasks of width ", width));
    }
    return absl::OkStatus();
  }
  if (static_cast<size_t>(r.rows_size()) != c.rows.size() ||
      static_cast<size_t>(r.row_sums_size()) != c.rows.size() * width) {
    return absl::DataLossError(
        absl::StrCat("returned ", r.rows_size(), " rows / ", r.row_sums_size(),
                     " sums for ", c.rows.size(), " rows of width ", width));
  }
  for (int k = 0; k < r.rows_size(); ++k) {
    if (r.rows(k) != static_cast<uint32_t>(k)) {
      return absl::DataLossError("returned rows out of order");
    }
  }
  return absl::OkStatus();
}

// Room for everything in a message besides the float / double payload.
constexpr uint64_t kMessageSlackBytes = 64 << 10;

}  // namespace

uint64_t RemoteExperts::Impl::CallPayloadBudget() const {
  const uint64_t limit =
      options.max_call_bytes > 0
          ? std::min(options.max_call_bytes, max_message_bytes)
          : max_message_bytes;
  return limit - std::min(kMessageSlackBytes, limit / 2);
}

absl::Status RemoteExperts::Impl::AwaitComputeCalls(size_t count) {
  // Every call carries its deadline, so every one completes (OK, error or
  // DEADLINE_EXCEEDED) and this loop ends.
  for (size_t left = count; left > 0;) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) {
      return absl::InternalError("completion queue shut down");
    }
    CqTag* done = static_cast<CqTag*>(tag);
    if (done->prefetch) {  // a hint's answer: counted, not waited for
      OnPrefetchDone(static_cast<PrefetchCall*>(done));
      continue;
    }
    static_cast<ComputeTag*>(done)->answered = RemoteClock::now();
    --left;
  }
  return absl::OkStatus();
}

absl::Status RemoteExperts::Impl::ComputeLayer(
    int layer, const float* z, int rows, const std::vector<ExpertTask>& tasks,
    float* out) {
  const size_t width = config.routed_expert_hidden_size;
  if (layer < 0 || layer >= config.num_hidden_layers ||
      holders[layer].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has no routed experts"));
  }
  if (rows < 0) return absl::InvalidArgumentError("negative row count");
  std::fill(out, out + static_cast<size_t>(rows) * width, 0.0f);
  if (tasks.empty() || rows == 0) return absl::OkStatus();
  const RemoteClock::time_point layer_start = RemoteClock::now();
  const int num_experts = config.num_experts;
  for (const ExpertTask& t : tasks) {
    if (t.row < 0 || t.row >= rows || t.expert < 0 || t.expert >= num_experts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task (row ", t.row, ", expert ", t.expert, ") out of range"));
    }
  }
  if (is_split) return ComputeSplitLayer(layer, z, rows, tasks, out);
  const bool row_sums = options.row_sums;
  const uint64_t step_id = step++;
  const int num_workers = static_cast<int>(workers.size());

  std::vector<std::unique_ptr<Call>> calls;
  std::vector<int> task_call(tasks.size(), -1), task_pos(tasks.size(), -1);
  std::vector<bool> needed(num_experts, false);
  for (const ExpertTask& t : tasks) needed[t.expert] = true;
  std::vector<int> need;  // experts to deal this round, ascending
  for (int e = 0; e < num_experts; ++e) {
    if (needed[e]) need.push_back(e);
  }
  std::vector<bool> failed(num_workers, false);  // in this layer
  double slowest_worker = 0, slowest_rpc = 0;
  std::vector<uint64_t> worker_bytes(num_workers, 0);

  for (int round = 0; !need.empty(); ++round) {
    // Deal the experts over their live holders, as evenly as possible.
    std::vector<int> chosen, unserved, load(num_workers, 0);
    std::vector<int8_t> usable(num_workers, -1);  // -1: not asked yet
    DealLayer(
        layer, need,
        [&](int w) {
          if (usable[w] < 0) usable[w] = !failed[w] && Usable(w);
          return usable[w] > 0;
        },
        /*prefer_hinted=*/round == 0, &chosen, &unserved);
    if (!unserved.empty()) {
      std::set<int> down;
      for (int e : unserved)
        down.insert(holders[layer][e].begin(), holders[layer][e].end());
      std::vector<std::string> why;
      for (int w : down) {
        why.push_back(absl::StrCat(
            workers[w].Name(), ": ",
            workers[w].last_error.empty() ? "failed" : workers[w].last_error));
      }
      return absl::UnavailableError(absl::StrCat(
          "layer ", layer, ": no live expert worker holds expert",
          unserved.size() > 1 ? "s " : " ", absl::StrJoin(unserved, ","),
          " (missing: ", absl::StrJoin(why, "; "), ")"));
    }
    for (int e : need) {
      if (chosen[e] >= 0) ++load[chosen[e]];
    }
    // A hint serves one step: the next one is dealt afresh.
    if (round == 0) std::fill(hinted[layer].begin(), hinted[layer].end(), -1);

    // Build calls: per worker, its tasks in task order; split by rows when
    // a message would pass the limit.
    const size_t first_call = calls.size();
    const uint64_t budget = CallPayloadBudget();
    for (int w = 0; w < num_workers; ++w) {
      if (load[w] == 0) continue;
      std::vector<int> row_tasks(rows, 0);
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (chosen[tasks[i].expert] == w) ++row_tasks[tasks[i].row];
      }
      std::vector<int> chunk_of(rows, -1);
      uint64_t chunk_tasks = 0, chunk_rows = 0;
      int chunk = -1;
      for (int r = 0; r < rows; ++r) {
        if (row_tasks[r] == 0) continue;
        const uint64_t t = chunk_tasks + row_tasks[r], n = chunk_rows + 1;
        const uint64_t bytes =
            std::max(n * width * (row_sums ? 8 : 4), t * width * 4);
        if (chunk < 0 || bytes > budget) {
          calls.push_back(std::make_unique<Call>());
          calls.back()->worker = w;
          chunk = static_cast<int>(calls.size() - 1);
          chunk_tasks = chunk_rows = 0;
        }
        chunk_of[r] = chunk;
        chunk_tasks += row_tasks[r];
        ++chunk_rows;
        calls[chunk]->rows.push_back(r);
      }
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (chosen[tasks[i].expert] != w) continue;
        Call& c = *calls[chunk_of[tasks[i].row]];
        task_call[i] = chunk_of[tasks[i].row];
        task_pos[i] = static_cast<int>(c.tasks.size());
        c.tasks.push_back(static_cast<int>(i));
      }
    }
    for (size_t ci = first_call; ci < calls.size(); ++ci) {
      Call& c = *calls[ci];
      v1::ComputeRequest& q = c.request;
      q.set_layer(layer);
      q.set_step_id(step_id);
      q.set_row_width(static_cast<uint32_t>(width));
      q.set_num_rows(static_cast<uint32_t>(c.rows.size()));
      q.set_output(row_sums ? v1::OUTPUT_KIND_ROW_SUMS
                            : v1::OUTPUT_KIND_EXPERT_OUTPUTS);
      q.mutable_activations()->Resize(static_cast<int>(c.rows.size() * width),
                                      0.0f);
      float* act = q.mutable_activations()->mutable_data();
      std::vector<int> local(rows, -1);
      for (size_t k = 0; k < c.rows.size(); ++k) {
        local[c.rows[k]] = static_cast<int>(k);
        std::memcpy(act + k * width, z + static_cast<size_t>(c.rows[k]) * width,
                    width * sizeof(float));
      }
      q.mutable_assignments()->Reserve(static_cast<int>(c.tasks.size()));
      for (int i : c.tasks) {
        v1::Assignment* a = q.add_assignments();
        a->set_row(static_cast<uint32_t>(local[tasks[i].row]));
        a->set_expert(static_cast<uint32_t>(tasks[i].expert));
        a->set_weight(tasks[i].weight);
      }
      stats.request_bytes += q.ByteSizeLong();
      ++stats.calls;
      if (round > 0) ++stats.retried_calls;
      c.context.set_deadline(
          std::chrono::system_clock::now() +
          std::chrono::milliseconds(options.rpc_deadline_ms));
      c.sent = RemoteClock::now();
      c.reader =
          workers[c.worker].stub->AsyncCompute(&c.context, c.request, &cq);
      c.reader->Finish(&c.response, &c.status, &c);
    }
    FLOTILLA_RETURN_IF_ERROR(AwaitComputeCalls(calls.size() - first_call));

    // Collect; failed workers' experts go to the next round.
    std::vector<bool> retry(num_experts, false);
    for (size_t ci = first_call; ci < calls.size(); ++ci) {
      Call& c = *calls[ci];
      WorkerConn& worker = workers[c.worker];
      absl::Status s = transport::FromGrpcStatus(c.status);
      if (s.code() == absl::StatusCode::kInvalidArgument) {
        // Not a dead worker but a disagreement about the request: a bug or
        // a mismatched fleet. Retrying elsewhere would hide it.
        return absl::InternalError(
            absl::StrCat("layer ", layer, ": expert ", worker.Name(),
                         " rejected the call: ", s.message()));
      }
      if (s.ok()) s = CheckResponse(c, width, row_sums);
      if (!s.ok()) {
        ++stats.failed_calls;
        failed[c.worker] = true;
        MarkDown(c.worker, absl::StrCat(absl::StatusCodeToString(s.code()),
                                        ": ", s.message()));
        for (int i : c.tasks) retry[tasks[i].expert] = true;
        continue;
      }
      c.ok = true;
      const v1::ComputeStats& st = c.response.stats();
      stats.response_bytes += c.response.ByteSizeLong();
      slowest_worker = std::max(slowest_worker, st.wall_seconds());
      slowest_rpc = std::max(slowest_rpc, Seconds(c.answered - c.sent));
      backend.bytes_read += st.bytes_read();
      worker_bytes[c.worker] += st.bytes_read();
      backend.experts_used += st.experts_computed();
      backend.cache_hits += st.cache_hits();
      backend.prefetch_hits += st.prefetch_hits();
      backend.experts_read += st.experts_computed() - st.cache_hits();
      backend.compute_seconds += st.compute_seconds();
    }
    need.clear();
    for (int e = 0; e < num_experts; ++e) {
      if (retry[e]) need.push_back(e);
    }
  }

  // Combine in a fixed order; see remote_experts.h.
  std::vector<double> acc;
  if (!row_sums) {
    // Per-task outputs: the single-process combine itself, so the bits
    // match LocalExperts'.
    experts::CombineInTaskOrder(
        tasks.data(), tasks.size(), static_cast<size_t>(rows), width,
        [&](size_t i) {
          return calls[task_call[i]]->response.expert_outputs().data() +
                 static_cast<size_t>(task_pos[i]) * width;
        },
        &acc, out);
  } else {
    // Workers' double row sums, added call by call: not combine.h's
    // task-order rule. Calls were created round by round, worker by
    // worker, chunk by chunk; only the successful ones contribute.
    acc.assign(static_cast<size_t>(rows) * width, 0.0);
    for (const std::unique_ptr<Call>& c : calls) {
      if (!c->ok) continue;
      const double* s = c->response.row_sums().data();
      for (size_t k = 0; k < c->rows.size(); ++k) {
        double* a = acc.data() + static_cast<size_t>(c->rows[k]) * width;
        for (size_t j = 0; j < width; ++j) a[j] += s[k * width + j];
      }
    }
    for (size_t i = 0; i < acc.size(); ++i) {
      out[i] = static_cast<float>(acc[i]);
    }
  }

  const double wall = Seconds(RemoteClock::now() - layer_start);
  ++stats.layers;
  stats.layer_seconds += wall;
  stats.worker_seconds += std::min(wall, slowest_worker);
  stats.rpc_seconds += std::min(wall, slowest_rpc);
  if (stats.layer_overhead_seconds.size() < (1u << 20)) {
    stats.layer_overhead_seconds.push_back(
        static_cast<float>(wall - std::min(wall, slowest_worker)));
  }
  for (uint64_t b : worker_bytes) stats.worker_bytes_read += b;
  stats.busiest_worker_bytes +=
      *std::max_element(worker_bytes.begin(), worker_bytes.end());
  backend.io_wait_seconds += wall;
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator
