// RemoteExperts over a split fleet (shared/placement/expert_split.h): every
// worker holds a row slice of every expert, so each layer reads exactly 1/N
// of its expert bytes on each worker whatever the routing. A layer takes
// two rounds of calls, one call per worker (per chunk) in each:
//   1. GATE_UP_SLICE: the step's latent rows and every task; worker k
//      answers SiTU(W1 x, W3 x) for its intermediate rows of each task.
//   2. DOWN_SLICE: each task's whole activation vector (the slices
//      concatenated in row order); worker k answers W2 act for its latent
//      rows.
// The assembled per-task outputs are bitwise the whole experts' (each
// element is one dot product on one worker) and are combined in task order
// exactly as LocalExperts does, so the generated tokens and logits are
// bitwise those of the single-process run, for any worker count.
//
// A split fleet has no replicas: when a worker fails the layer fails with
// UNAVAILABLE naming it and its rows; the worker is probed again after the
// backoff (Usable), so the coordinator serves again once it is back.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "coordinator/remote/remote_experts_internal.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"
#include "shared/experts/combine.h"

namespace flotilla::coordinator {
namespace {

using base::Seconds;

// One call of one round: worker `rpc.worker`'s share of tasks [begin, end).
struct SliceCall {
  ComputeCall rpc;
  size_t begin = 0, end = 0;
};

std::string SliceName(const WorkerConn& w) {
  const v1::ExpertSlice& s = w.info.split();
  return absl::StrCat(w.Name(), ", rows [", s.inter_begin(), ", ",
                      s.inter_end(), ") of w1/w3 and [", s.latent_begin(), ", ",
                      s.latent_end(), ") of w2 of every expert");
}

}  // namespace

absl::Status RemoteExperts::Impl::CheckSplitFleet() {
  std::vector<const WorkerConn*> split, whole;
  for (const WorkerConn& w : workers) {
    (w.info.has_split() ? split : whole).push_back(&w);
  }
  if (split.empty()) return absl::OkStatus();
  if (!whole.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("expert ", split[0]->Name(),
                     " holds row slices of every expert (pack --split) but ",
                     whole[0]->Name(),
                     " holds whole experts; a fleet is either split or not"));
  }
  if (options.row_sums) {
    return absl::InvalidArgumentError(
        "row sums do not apply to a split fleet (its workers return slices "
        "of each expert's output); drop --row-sums");
  }
  const size_t n = workers.size();
  std::vector<const WorkerConn*> by_index(n, nullptr);
  for (const WorkerConn* w : split) {
    const v1::ExpertSlice& s = w->info.split();
    if (s.count() != n || s.index() >= n || by_index[s.index()] != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("expert ", w->Name(), " is slice ", s.index(), " of ",
                       s.count(), " but --workers lists ", n, " workers",
                       s.index() < n && by_index[s.index()] != nullptr
                           ? absl::StrCat(" and ", by_index[s.index()]->Name(),
                                          " is that slice too")
                           : "",
                       "; list each worker of the split fleet once"));
    }
    by_index[s.index()] = w;
  }
  // The slices must tile both dimensions in index order.
  uint64_t inter = 0, latent = 0;
  for (const WorkerConn* w : by_index) {
    const v1::ExpertSlice& s = w->info.split();
    if (s.intermediate() != static_cast<uint32_t>(config.intermediate_size) ||
        s.inter_begin() != inter || s.inter_end() <= s.inter_begin() ||
        s.latent_begin() != latent || s.latent_end() <= s.latent_begin()) {
      return absl::FailedPreconditionError(
          absl::StrCat("expert ", SliceName(*w),
                       " does not continue the slices before it "
                       "(expected rows from ",
                       inter, " and ", latent, ", intermediate size ",
                       config.intermediate_size, ")"));
    }
    inter = s.inter_end();
    latent = s.latent_end();
  }
  if (inter != static_cast<uint64_t>(config.intermediate_size) ||
      latent != static_cast<uint64_t>(config.hidden_size)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the split fleet's slices cover ", inter,
                     " intermediate and ", latent, " latent rows, not ",
                     config.intermediate_size, " and ", config.hidden_size));
  }
  is_split = true;
  return absl::OkStatus();
}

absl::Status RemoteExperts::Impl::RunSliceRound(
    int layer, bool down, const float* in, size_t num_in_rows, size_t in_width,
    const std::vector<int>& in_row, const std::vector<ExpertTask>& tasks,
    float* assembled, size_t out_width, LayerTotals* totals) {
  const uint64_t step_id = step;
  const size_t n = tasks.size();
  // Chunks of consecutive tasks, the same for every worker, each within
  // the message limit however the rows fall.
  const uint64_t budget = CallPayloadBudget();
  const uint64_t per_task = std::max(in_width, out_width) * sizeof(float) + 16;
  const size_t chunk = std::max<uint64_t>(1, budget / per_task);

  std::vector<std::unique_ptr<SliceCall>> calls;
  std::vector<int> local_of(num_in_rows, -1);  // input row -> request row
  for (size_t w = 0; w < workers.size(); ++w) {
    for (size_t begin = 0; begin < n; begin += chunk) {
      auto c = std::make_unique<SliceCall>();
      c->rpc.worker = static_cast<int>(w);
      c->begin = begin;
      c->end = std::min(n, begin + chunk);
      v1::ComputeRequest& q = c->rpc.request;
      q.set_layer(static_cast<uint32_t>(layer));
      q.set_step_id(step_id);
      q.set_row_width(static_cast<uint32_t>(in_width));
      q.set_output(down ? v1::OUTPUT_KIND_DOWN_SLICE
                        : v1::OUTPUT_KIND_GATE_UP_SLICE);
      // Request rows: the distinct input rows of the chunk's tasks, in
      // first-use order.
      std::vector<int> local;
      std::vector<uint32_t> task_row(c->end - c->begin);
      for (size_t i = c->begin; i < c->end; ++i) {
        int& slot = local_of[in_row[i]];
        if (slot < 0) {
          slot = static_cast<int>(local.size());
          local.push_back(in_row[i]);
        }
        task_row[i - c->begin] = static_cast<uint32_t>(slot);
      }
      for (int r : local) local_of[r] = -1;
      q.set_num_rows(static_cast<uint32_t>(local.size()));
      q.mutable_activations()->Resize(static_cast<int>(local.size() * in_width),
                                      0.0f);
      float* act = q.mutable_activations()->mutable_data();
      for (size_t k = 0; k < local.size(); ++k) {
        std::memcpy(act + k * in_width,
                    in + static_cast<size_t>(local[k]) * in_width,
                    in_width * sizeof(float));
      }
      q.mutable_assignments()->Reserve(static_cast<int>(c->end - c->begin));
      for (size_t i = c->begin; i < c->end; ++i) {
        v1::Assignment* a = q.add_assignments();
        a->set_row(task_row[i - c->begin]);
        a->set_expert(static_cast<uint32_t>(tasks[i].expert));
        a->set_weight(tasks[i].weight);
      }
      // Sent as soon as it is built: the first worker starts while the
      // next request is being filled.
      stats.request_bytes += q.ByteSizeLong();
      ++stats.calls;
      transport->StartCompute(&c->rpc, options.rpc_deadline_ms);
      calls.push_back(std::move(c));
    }
  }
  transport->AwaitComputes();

  double slowest_worker = 0, slowest_rpc = 0;
  for (const std::unique_ptr<SliceCall>& c : calls) {
    const int w = c->rpc.worker;
    WorkerConn& worker = workers[w];
    const v1::ComputeResponse& response = c->rpc.response;
    const v1::ExpertSlice& s = worker.info.split();
    const size_t begin = down ? s.latent_begin() : s.inter_begin();
    const size_t width = (down ? s.latent_end() : s.inter_end()) - begin;
    absl::Status st = c->rpc.status;
    if (st.code() == absl::StatusCode::kInvalidArgument) {
      return absl::InternalError(
          absl::StrCat("layer ", layer, ": expert ", worker.Name(),
                       " rejected the call: ", st.message()));
    }
    const size_t count = c->end - c->begin;
    stats.workers[w].compute.Add(Seconds(c->rpc.answered - c->rpc.sent));
    if (st.ok() &&
        static_cast<size_t>(response.slice_outputs_size()) != count * width) {
      st = absl::DataLossError(
          absl::StrCat("returned ", response.slice_outputs_size(),
                       " floats for ", count, " tasks of slice width ", width));
    }
    if (!st.ok()) {
      ++stats.failed_calls;
      ++stats.workers[w].compute_failed;
      const std::string why =
          absl::StrCat(absl::StatusCodeToString(st.code()), ": ", st.message());
      MarkDown(w, why);
      return absl::UnavailableError(absl::StrCat(
          "layer ", layer, ": expert ", SliceName(worker), " failed (", why,
          "); a split fleet has no replicas, so every expert of the layer "
          "is missing that slice"));
    }
    const float* got = response.slice_outputs().data();
    for (size_t i = 0; i < count; ++i) {
      std::memcpy(assembled + (c->begin + i) * out_width + begin,
                  got + i * width, width * sizeof(float));
    }
    const v1::ComputeStats& cs = response.stats();
    stats.response_bytes += response.ByteSizeLong();
    slowest_worker = std::max(slowest_worker, cs.wall_seconds());
    slowest_rpc = std::max(slowest_rpc, Seconds(c->rpc.answered - c->rpc.sent));
    totals->worker_bytes[w] += cs.bytes_read();
    if (down) stats.split_down_bytes_read += cs.bytes_read();
    backend.bytes_read += cs.bytes_read();
    backend.compute_seconds += cs.compute_seconds();
    if (!down) {
      // Experts count once per layer: take worker 0's view of them.
      if (w == 0) {
        backend.cache_hits += cs.cache_hits();
        backend.prefetch_hits += cs.prefetch_hits();
        backend.experts_read += cs.experts_computed() - cs.cache_hits();
      }
    }
  }
  totals->slowest_worker += slowest_worker;
  totals->slowest_rpc += slowest_rpc;
  return absl::OkStatus();
}

absl::Status RemoteExperts::Impl::ComputeSplitLayer(
    int layer, const float* z, int rows, const std::vector<ExpertTask>& tasks,
    float* out) {
  const RemoteClock::time_point layer_start = RemoteClock::now();
  const size_t lat = config.hidden_size;
  const size_t inter = config.intermediate_size;
  const size_t n = tasks.size();
  for (size_t w = 0; w < workers.size(); ++w) {
    if (!Usable(static_cast<int>(w))) {
      return absl::UnavailableError(absl::StrCat(
          "layer ", layer, ": expert ", SliceName(workers[w]), " is down (",
          workers[w].last_error,
          "); a split fleet has no replicas, so every expert of the layer "
          "is missing that slice"));
    }
  }
  LayerTotals totals;
  totals.worker_bytes.assign(workers.size(), 0);
  // Groups of at most `resident` distinct experts (ascending), each taken
  // through both rounds before the next: a worker keeps that many slices
  // between the rounds, so a step with more experts (a prefill) would
  // otherwise read the evicted ones twice. Decode: one group.
  size_t resident = SIZE_MAX;
  for (const WorkerConn& w : workers) {
    resident = std::min<size_t>(
        resident, std::max<uint32_t>(1, w.info.split().resident_experts()));
  }
  std::vector<int> group_of(config.num_experts, -1);
  int groups = 0;
  {
    size_t in_group = 0;
    std::vector<bool> used(config.num_experts, false);
    for (const ExpertTask& t : tasks) used[t.expert] = true;
    for (int e = 0; e < config.num_experts; ++e) {
      if (!used[e]) continue;
      if (in_group == 0) ++groups;
      group_of[e] = groups - 1;
      if (++in_group == resident) in_group = 0;
    }
  }
  out_scratch.resize(n * lat);
  std::vector<ExpertTask> group_tasks;
  std::vector<int> task_index, task_rows, identity;
  std::vector<float> group_out;
  for (int g = 0; g < groups; ++g) {
    group_tasks.clear();
    task_index.clear();
    task_rows.clear();
    identity.clear();
    for (size_t i = 0; i < n; ++i) {
      if (group_of[tasks[i].expert] != g) continue;
      identity.push_back(static_cast<int>(group_tasks.size()));
      group_tasks.push_back(tasks[i]);
      task_index.push_back(static_cast<int>(i));
      task_rows.push_back(tasks[i].row);
    }
    const size_t m = group_tasks.size();
    // Round 1: the gate/up slices, assembled into each task's activations.
    act_scratch.resize(m * inter);
    FLOTILLA_RETURN_IF_ERROR(RunSliceRound(
        layer, /*down=*/false, z, static_cast<size_t>(rows), lat, task_rows,
        group_tasks, act_scratch.data(), inter, &totals));
    // Round 2: the down projection of the assembled activations (request
    // row i is the group's task i).
    float* dest = out_scratch.data();
    if (groups > 1) {
      group_out.resize(m * lat);
      dest = group_out.data();
    }
    FLOTILLA_RETURN_IF_ERROR(
        RunSliceRound(layer, /*down=*/true, act_scratch.data(), m, inter,
                      identity, group_tasks, dest, lat, &totals));
    if (groups > 1) {
      for (size_t j = 0; j < m; ++j) {
        std::memcpy(out_scratch.data() + task_index[j] * lat,
                    group_out.data() + j * lat, lat * sizeof(float));
      }
    }
  }
  ++step;
  backend.experts_used += std::count_if(group_of.begin(), group_of.end(),
                                        [](int g) { return g >= 0; });

  // Per-task outputs, combined as LocalExperts combines them.
  std::vector<double> acc;
  experts::CombineInTaskOrder(
      tasks.data(), n, static_cast<size_t>(rows), lat,
      [&](size_t i) { return out_scratch.data() + i * lat; }, &acc, out);

  const double wall = Seconds(RemoteClock::now() - layer_start);
  ++stats.layers;
  stats.layer_seconds += wall;
  stats.worker_seconds += std::min(wall, totals.slowest_worker);
  stats.rpc_seconds += std::min(wall, totals.slowest_rpc);
  if (stats.layer_overhead_seconds.size() < (1u << 20)) {
    stats.layer_overhead_seconds.push_back(
        static_cast<float>(wall - std::min(wall, totals.slowest_worker)));
  }
  for (uint64_t b : totals.worker_bytes) stats.worker_bytes_read += b;
  stats.busiest_worker_bytes +=
      *std::max_element(totals.worker_bytes.begin(), totals.worker_bytes.end());
  backend.io_wait_seconds += wall;
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator
