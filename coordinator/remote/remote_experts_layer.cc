// RemoteExperts::ComputeLayer over whole experts, in four steps: deal the
// layer's experts to workers, build one call per worker (BuildLayerCalls),
// send them all and await every answer (WorkerTransport), and
// collect (CollectRound) -- failed workers' experts go round again on their
// replicas -- then combine in a fixed order (CombineLayer; see
// remote_experts.h).
#include <algorithm>
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

using base::Seconds;

// Room for everything in a message besides the float / double payload.
constexpr uint64_t kMessageSlackBytes = 64 << 10;

}  // namespace

void BuildLayerCalls(int layer, uint64_t step_id, const float* z, int rows,
                     size_t width, bool row_sums,
                     const std::vector<ExpertTask>& tasks,
                     const std::vector<int>& chosen, int num_workers,
                     uint64_t payload_budget,
                     std::vector<std::unique_ptr<LayerCall>>* calls,
                     TaskPlacement* placement) {
  const size_t first_call = calls->size();
  placement->call.resize(tasks.size(), -1);
  placement->pos.resize(tasks.size(), -1);
  for (int w = 0; w < num_workers; ++w) {
    std::vector<int> row_tasks(rows, 0);
    bool any = false;
    for (const ExpertTask& t : tasks) {
      if (chosen[t.expert] == w) {
        ++row_tasks[t.row];
        any = true;
      }
    }
    if (!any) continue;
    // Rows in chunks whose payload fits the budget.
    std::vector<int> chunk_of(rows, -1);
    uint64_t chunk_tasks = 0, chunk_rows = 0;
    int chunk = -1;
    for (int r = 0; r < rows; ++r) {
      if (row_tasks[r] == 0) continue;
      const uint64_t t = chunk_tasks + row_tasks[r], n = chunk_rows + 1;
      const uint64_t bytes =
          std::max(n * width * (row_sums ? 8 : 4), t * width * 4);
      if (chunk < 0 || bytes > payload_budget) {
        calls->push_back(std::make_unique<LayerCall>());
        calls->back()->rpc.worker = w;
        chunk = static_cast<int>(calls->size() - 1);
        chunk_tasks = chunk_rows = 0;
      }
      chunk_of[r] = chunk;
      chunk_tasks += row_tasks[r];
      ++chunk_rows;
      (*calls)[chunk]->rows.push_back(r);
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (chosen[tasks[i].expert] != w) continue;
      LayerCall& c = *(*calls)[chunk_of[tasks[i].row]];
      placement->call[i] = chunk_of[tasks[i].row];
      placement->pos[i] = static_cast<int>(c.tasks.size());
      c.tasks.push_back(static_cast<int>(i));
    }
  }
  for (size_t ci = first_call; ci < calls->size(); ++ci) {
    LayerCall& c = *(*calls)[ci];
    v1::ComputeRequest& q = c.rpc.request;
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
  }
}

absl::Status CheckLayerResponse(const LayerCall& c, size_t width,
                                bool row_sums) {
  const v1::ComputeResponse& r = c.rpc.response;
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

void CombineLayer(const std::vector<ExpertTask>& tasks, int rows, size_t width,
                  bool row_sums,
                  const std::vector<std::unique_ptr<LayerCall>>& calls,
                  const TaskPlacement& placement, float* out) {
  std::vector<double> acc;
  if (!row_sums) {
    // Per-task outputs: the single-process combine itself, so the bits
    // match LocalExperts'.
    experts::CombineInTaskOrder(
        tasks.data(), tasks.size(), static_cast<size_t>(rows), width,
        [&](size_t i) {
          return calls[placement.call[i]]
                     ->rpc.response.expert_outputs()
                     .data() +
                 static_cast<size_t>(placement.pos[i]) * width;
        },
        &acc, out);
    return;
  }
  // Workers' double row sums, added call by call: not combine.h's
  // task-order rule. Calls were created round by round, worker by worker,
  // chunk by chunk; only the successful ones contribute.
  acc.assign(static_cast<size_t>(rows) * width, 0.0);
  for (const std::unique_ptr<LayerCall>& c : calls) {
    if (!c->ok) continue;
    const double* s = c->rpc.response.row_sums().data();
    for (size_t k = 0; k < c->rows.size(); ++k) {
      double* a = acc.data() + static_cast<size_t>(c->rows[k]) * width;
      for (size_t j = 0; j < width; ++j) a[j] += s[k * width + j];
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
}

uint64_t RemoteExperts::Impl::CallPayloadBudget() const {
  const uint64_t limit =
      options.max_call_bytes > 0
          ? std::min(options.max_call_bytes, max_message_bytes)
          : max_message_bytes;
  return limit - std::min(kMessageSlackBytes, limit / 2);
}

absl::Status RemoteExperts::Impl::Unserved(
    int layer, const std::vector<int>& unserved) const {
  std::set<int> down;
  for (int e : unserved) {
    down.insert(holders[layer][e].begin(), holders[layer][e].end());
  }
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

absl::Status RemoteExperts::Impl::CollectRound(
    int layer, size_t width,
    const std::vector<std::unique_ptr<LayerCall>>& calls, size_t first,
    std::vector<bool>* failed, std::vector<bool>* retry, double* slowest_worker,
    double* slowest_rpc, std::vector<uint64_t>* worker_bytes) {
  const bool row_sums = options.row_sums;
  for (size_t ci = first; ci < calls.size(); ++ci) {
    LayerCall& c = *calls[ci];
    const int w = c.rpc.worker;
    absl::Status s = c.rpc.status;
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InternalError(
          absl::StrCat("layer ", layer, ": expert ", workers[w].Name(),
                       " rejected the call: ", s.message()));
    }
    stats.workers[w].compute.Add(Seconds(c.rpc.answered - c.rpc.sent));
    if (s.ok()) s = CheckLayerResponse(c, width, row_sums);
    if (!s.ok()) {
      ++stats.failed_calls;
      ++stats.workers[w].compute_failed;
      (*failed)[w] = true;
      MarkDown(w, absl::StrCat(absl::StatusCodeToString(s.code()), ": ",
                               s.message()));
      for (int i : c.tasks) (*retry)[i] = true;
      continue;
    }
    c.ok = true;
    const v1::ComputeStats& st = c.rpc.response.stats();
    stats.response_bytes += c.rpc.response.ByteSizeLong();
    *slowest_worker = std::max(*slowest_worker, st.wall_seconds());
    *slowest_rpc = std::max(*slowest_rpc, Seconds(c.rpc.answered - c.rpc.sent));
    backend.bytes_read += st.bytes_read();
    (*worker_bytes)[w] += st.bytes_read();
    backend.experts_used += st.experts_computed();
    backend.cache_hits += st.cache_hits();
    backend.prefetch_hits += st.prefetch_hits();
    backend.experts_read += st.experts_computed() - st.cache_hits();
    backend.compute_seconds += st.compute_seconds();
  }
  return absl::OkStatus();
}

absl::Status RemoteExperts::Impl::ComputeLayer(
    int layer, const float* z, int rows, const std::vector<ExpertTask>& tasks,
    float* out) {
  const size_t width = config.hidden_size;
  if (layer < 0 || layer >= config.num_layers || holders[layer].empty()) {
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
  ProbeAbsent();
  const uint64_t step_id = step++;
  const int num_workers = static_cast<int>(workers.size());

  std::vector<std::unique_ptr<LayerCall>> calls;
  TaskPlacement placement;
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
    // 1. Deal the experts over their live holders, as evenly as possible.
    std::vector<int> chosen, unserved;
    std::vector<int8_t> usable(num_workers, -1);  // -1: not asked yet
    DealLayer(
        layer, need,
        [&](int w) {
          if (usable[w] < 0) usable[w] = !failed[w] && Usable(w);
          return usable[w] > 0;
        },
        /*prefer_hinted=*/round == 0, &chosen, &unserved);
    if (!unserved.empty()) return Unserved(layer, unserved);
    // A hint serves one step: the next one is dealt afresh.
    if (round == 0) std::fill(hinted[layer].begin(), hinted[layer].end(), -1);

    // 2. Build one call per worker (more when a message would pass the
    // limit).
    const size_t first_call = calls.size();
    BuildLayerCalls(layer, step_id, z, rows, width, options.row_sums, tasks,
                    chosen, num_workers, CallPayloadBudget(), &calls,
                    &placement);

    // 3. Send them all and await every answer.
    for (size_t ci = first_call; ci < calls.size(); ++ci) {
      stats.request_bytes += calls[ci]->rpc.request.ByteSizeLong();
      ++stats.calls;
      if (round > 0) ++stats.retried_calls;
      transport->StartCompute(&calls[ci]->rpc, options.rpc_deadline_ms);
    }
    transport->AwaitComputes();

    // 4. Collect; failed workers' tasks go to the next round.
    std::vector<bool> retry_task(tasks.size(), false);
    FLOTILLA_RETURN_IF_ERROR(CollectRound(layer, width, calls, first_call,
                                          &failed, &retry_task, &slowest_worker,
                                          &slowest_rpc, &worker_bytes));
    std::vector<bool> retry(num_experts, false);
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (retry_task[i]) retry[tasks[i].expert] = true;
    }
    need.clear();
    for (int e = 0; e < num_experts; ++e) {
      if (retry[e]) need.push_back(e);
    }
  }

  // 5. Combine in a fixed order; see remote_experts.h.
  CombineLayer(tasks, rows, width, options.row_sums, calls, placement, out);

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
