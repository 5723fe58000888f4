#include "expert-worker/expert_compute.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/experts/combine.h"
#include "shared/experts/expert_checksums.h"
#include "shared/model/safetensors.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::expert_worker {

using experts::ExpertKey;

namespace {

// The experts this worker may serve, located. From the pack's expert table
// when the plan found a fresh pack (the plan kept only the owned experts: a
// quarter of the full K3's 83,000 records for 1 of 4 workers), else from
// the safetensors headers. No config demand on the latter: a `pack
// --workers` folder holds only this worker's share. Shapes and coverage of
// what we serve are checked by the caller.
absl::StatusOr<experts::ExpertIndex> OwnIndex(const ShardPlan& plan) {
  if (plan.pack_manifest != nullptr && !plan.split) {
    return experts::ExpertIndex::FromPackManifest(
        *plan.pack_manifest, plan.config, plan.model_dir, plan.pack_dir,
        /*require_every_expert=*/false);
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      auto ckpt, model::SafetensorsCheckpoint::OpenDir(plan.model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(experts::ExpertIndex index,
                            experts::ExpertIndex::FromTensorSource(*ckpt, {}));
  // A `pack --workers` folder carries the checksums of its experts.
  FLOTILLA_RETURN_IF_ERROR(
      experts::ApplyExpertChecksums(plan.model_dir, &index).status());
  return index;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExpertCompute>> ExpertCompute::Create(
    const ShardPlan& plan, const ComputeOptions& options) {
  auto self = std::unique_ptr<ExpertCompute>(new ExpertCompute(plan, options));
  const model::MoeSpec& c = plan.config;
  FLOTILLA_ASSIGN_OR_RETURN(experts::ExpertIndex index, OwnIndex(plan));
  const uint64_t lat = c.hidden_size;
  const uint64_t inter = c.intermediate_size;
  // What the folder must hold: whole experts, or this worker's row slice.
  uint64_t w13_rows = inter, w2_rows = lat;
  if (plan.split) {
    w13_rows = plan.split->inter_rows().size();
    w2_rows = plan.split->latent_rows().size();
  }
  if (index.size() == 0 || index.shape(0).rows != w13_rows ||
      index.shape(0).cols != lat || index.shape(1).rows != w2_rows ||
      index.shape(1).cols != inter || index.shape(2).rows != w13_rows ||
      index.shape(2).cols != lat) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.model_dir, ": routed experts have w1 [", index.shape(0).rows, ",",
        index.shape(0).cols, "], w2 [", index.shape(1).rows, ",",
        index.shape(1).cols, "] but ",
        plan.split ? absl::StrCat(plan.placement, " and config.json want")
                   : std::string("config.json wants"),
        " w1/w3 [", w13_rows, ",", lat, "] and w2 [", w2_rows, ",", inter,
        "]"));
  }
  self->owned_.assign(plan.num_layers, {});
  // The pack's runs are the checkpoint's own spans when it was packed in
  // place (the plan only keeps such a pack), so their checksums say what a
  // pack of the same checkpoint elsewhere must say too.
  const bool in_place_pack = plan.pack_manifest != nullptr && !plan.split;
  for (const auto& [layer, experts] : plan.owned_experts) {
    self->owned_[layer].assign(plan.num_experts, false);
    for (uint32_t e : experts) {
      const experts::ExpertLocation* loc =
          index.Find(ExpertKey{layer, static_cast<int32_t>(e)});
      if (in_place_pack && loc != nullptr && loc->has_checksum) {
        self->source_checksums_[layer].push_back(loc->checksum);
      }
      if (loc == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            plan.model_dir, " lacks layer ", layer, " expert ", e,
            ", which the placement assigns to worker ", plan.shard.index,
            " (copy this worker's folder from `flotilla-tool pack --workers`"
            " again, or check --shard / --placement)"));
      }
      self->owned_[layer][e] = true;
    }
  }
  self->accountant_ =
      std::make_unique<io::MemoryAccountant>(plan.memory_budget_bytes);
  // Scratch kept between calls (TrimScratch), ours and the engine's.
  FLOTILLA_RETURN_IF_ERROR(
      self->accountant_->Charge(kScratchOwner, 2 * kKeptScratchBytes));
  self->pool_ = std::make_unique<kernels::ThreadPool>(plan.compute_threads);
  experts::ExpertEngineOptions eo;
  eo.fetcher.slots = options.fetch_slots;
  eo.fetcher.queue_depth = options.queue_depth;
  eo.fetcher.direct_io = options.direct_io;
  eo.fetcher.accountant = self->accountant_.get();
  if (plan.split) {
    eo.sliced_intermediate = inter;
    eo.fetcher.cache_slots = SplitResidentExperts(c);
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      self->engine_,
      experts::ExpertEngine::Create(std::move(index), c.Activation(),
                                    self->pool_.get(), eo));
  return self;
}

bool ExpertCompute::Owns(int64_t layer, int64_t expert) const {
  return layer >= 0 && layer < static_cast<int64_t>(owned_.size()) &&
         expert >= 0 && expert < static_cast<int64_t>(owned_[layer].size()) &&
         owned_[layer][expert];
}

absl::StatusOr<ComputeShape> ExpertCompute::Validate(
    const ComputeCall& call) const {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  const int64_t layer = call.layer;
  if (layer < 0 || layer >= plan_.num_layers) {
    return bad("layer ", layer, " does not exist (the model has ",
               plan_.num_layers, " layers)");
  }
  if (owned_[layer].empty()) {
    return bad("layer ", layer,
               plan_.config.IsDenseLayer(static_cast<int>(layer))
                   ? " is a dense layer (no routed experts)"
                   : " has no experts on this worker");
  }
  const bool slice_kind =
      call.kind == CallKind::kGateUpSlice || call.kind == CallKind::kDownSlice;
  if (slice_kind != plan_.split.has_value()) {
    return bad(plan_.split
                   ? "this worker holds row slices of every expert (split "
                     "placement): it answers only GATE_UP_SLICE and "
                     "DOWN_SLICE calls"
                   : "GATE_UP_SLICE and DOWN_SLICE calls need a split worker; "
                     "this one holds whole experts");
  }
  if (call.kind == CallKind::kDownSlice) {
    if (call.row_width != plan_.config.intermediate_size) {
      return bad("row_width ", call.row_width,
                 " but DOWN_SLICE rows are the experts' intermediate "
                 "activations, of width ",
                 plan_.config.intermediate_size);
    }
  } else if (call.row_width != plan_.row_width) {
    return bad("row_width ", call.row_width,
               " but the model's latent width is ", plan_.row_width);
  }
  if (call.num_rows <= 0 || call.num_rows > kMaxRowsPerCall) {
    return bad("num_rows ", call.num_rows, " is outside [1, ", kMaxRowsPerCall,
               "]");
  }
  const uint64_t width = static_cast<uint64_t>(call.row_width);
  const uint64_t rows = static_cast<uint64_t>(call.num_rows);
  if (call.activations_size != rows * width) {
    return bad("activations hold ", call.activations_size,
               " floats but num_rows x row_width = ", rows * width);
  }
  const size_t n = call.assignments.size();
  if (n == 0 || n > kMaxAssignmentsPerCall) {
    return bad(n, " assignments (must be in [1, ", kMaxAssignmentsPerCall,
               "])");
  }
  std::vector<uint64_t> pairs(n);
  for (size_t i = 0; i < n; ++i) {
    const experts::ExpertAssignment& a = call.assignments[i];
    if (a.row < 0 || static_cast<uint64_t>(a.row) >= rows) {
      return bad("assignment ", i, ": row ", a.row, " is not below num_rows ",
                 rows);
    }
    if (!Owns(layer, a.expert)) {
      return bad("assignment ", i, ": layer ", layer, " expert ", a.expert,
                 a.expert >= 0 && a.expert < plan_.num_experts
                     ? " is not owned by this worker"
                     : " does not exist");
    }
    if (!std::isfinite(a.weight)) {
      return bad("assignment ", i, ": weight is not finite");
    }
    pairs[i] = static_cast<uint64_t>(a.row) * plan_.num_experts + a.expert;
  }
  std::sort(pairs.begin(), pairs.end());
  if (std::adjacent_find(pairs.begin(), pairs.end()) != pairs.end()) {
    return bad("a (row, expert) pair appears more than once");
  }
  ComputeShape shape;
  // Scratch holds one row per assignment whatever the kind (the engine
  // gathers each assignment's row); bound it like a message so no request
  // can make the worker allocate without limit.
  const uint64_t scratch_bytes = n * width * sizeof(float);
  if (call.kind == CallKind::kGateUpSlice) {
    shape.output_floats = n * plan_.split->inter_rows().size();
    shape.response_bytes = shape.output_floats * sizeof(float);
  } else if (call.kind == CallKind::kDownSlice) {
    shape.output_floats = n * plan_.split->latent_rows().size();
    shape.response_bytes = shape.output_floats * sizeof(float);
  } else if (call.kind == CallKind::kExpertOutputs) {
    shape.output_floats = n * width;
    shape.response_bytes = scratch_bytes;
  } else {
    std::vector<bool> used(rows, false);
    for (const experts::ExpertAssignment& a : call.assignments) {
      used[a.row] = true;
    }
    for (uint64_t r = 0; r < rows; ++r) {
      if (used[r]) shape.rows.push_back(static_cast<uint32_t>(r));
    }
    shape.output_doubles = shape.rows.size() * width;
    shape.response_bytes = shape.output_doubles * sizeof(double) +
                           shape.rows.size() * sizeof(uint32_t);
  }
  const uint64_t limit = options_.max_response_bytes;
  if (std::max(scratch_bytes, shape.response_bytes) + 4096 > limit) {
    return bad("the call needs ", std::max(scratch_bytes, shape.response_bytes),
               " bytes of results, above the ", limit,
               "-byte message limit; split it into smaller calls");
  }
  return shape;
}

uint64_t ExpertCompute::CallBytes(const ComputeCall& call,
                                  const ComputeShape& shape) const {
  const uint64_t n = call.assignments.size();
  const uint64_t width = static_cast<uint64_t>(call.row_width);
  const uint64_t rows = static_cast<uint64_t>(call.num_rows);
  // The response payload, and gRPC's serialized copy of it while it is
  // sent.
  uint64_t bytes = 2 * shape.response_bytes;
  // call.assignments, and in row-sums mode outputs_ and row_slot_.
  bytes += n * sizeof(experts::ExpertAssignment);
  if (call.kind == CallKind::kRowSums) {
    bytes += n * width * 4 + rows * sizeof(int32_t);
  }
  return bytes + engine_->ScratchBytesFor(rows, n);
}

void ExpertCompute::TrimScratch() {
  const uint64_t ours = outputs_.capacity() * sizeof(float) +
                        row_slot_.capacity() * sizeof(int32_t);
  if (ours > kKeptScratchBytes) {
    std::vector<float>().swap(outputs_);
    std::vector<int32_t>().swap(row_slot_);
  }
  engine_->TrimScratch(kKeptScratchBytes);
}

absl::Status ExpertCompute::Run(const ComputeCall& call,
                                const ComputeShape& shape, float* outputs,
                                double* row_sums, ComputeCallStats* stats) {
  // Whatever happens, a big call's scratch does not outlive its charge.
  absl::Cleanup trim = [this] { TrimScratch(); };
  const size_t n = call.assignments.size();
  const size_t width = static_cast<size_t>(call.row_width);
  const experts::FetchStats before = engine_->stats();
  // Per-assignment values (the engine gathers each assignment's row):
  // straight into the response, or for row sums into scratch first.
  float* out = outputs;
  if (call.kind == CallKind::kRowSums) {
    outputs_.resize(n * width);
    out = outputs_.data();
  }
  const experts::ExpertPhase phase =
      call.kind == CallKind::kGateUpSlice ? experts::ExpertPhase::kGateUp
      : call.kind == CallKind::kDownSlice ? experts::ExpertPhase::kDown
                                          : experts::ExpertPhase::kWhole;
  FLOTILLA_RETURN_IF_ERROR(engine_->ComputeTasks(
      phase, static_cast<int>(call.layer), call.activations,
      static_cast<int>(call.num_rows), call.assignments.data(), n, out));
  const experts::FetchStats& after = engine_->stats();
  // Reads a Prefetch started for this call's experts count as this call's
  // (the coordinator measures how each layer's reads were spread); reads
  // it started that nobody used count nowhere.
  stats->bytes_read = after.bytes_read - before.bytes_read +
                      after.prefetch_hit_bytes - before.prefetch_hit_bytes;
  stats->read_seconds = after.fetch_seconds - before.fetch_seconds;
  stats->compute_seconds = after.compute_seconds - before.compute_seconds;
  stats->cache_hits =
      static_cast<uint32_t>(after.cache_hits - before.cache_hits);
  stats->experts_computed =
      static_cast<uint32_t>(after.experts_requested - before.experts_requested);
  stats->prefetch_hits =
      static_cast<uint32_t>(after.prefetch_hits - before.prefetch_hits);
  if (call.kind != CallKind::kRowSums) return absl::OkStatus();

  row_slot_.assign(static_cast<size_t>(call.num_rows), -1);
  for (size_t k = 0; k < shape.rows.size(); ++k) {
    row_slot_[shape.rows[k]] = static_cast<int32_t>(k);
  }
  std::fill(row_sums, row_sums + shape.output_doubles, 0.0);
  // Request order, double products and sums: the single-process combine's
  // step (combine.h), restricted to this worker's assignments. The sums
  // stay double (the coordinator rounds once), so not CombineInTaskOrder.
  for (size_t i = 0; i < n; ++i) {
    const experts::ExpertAssignment& a = call.assignments[i];
    experts::AccumulateWeighted(
        row_sums + static_cast<size_t>(row_slot_[a.row]) * width,
        out + i * width, a.weight, width);
  }
  return absl::OkStatus();
}

absl::Status ExpertCompute::ValidatePrefetch(
    int64_t layer, const std::vector<uint32_t>& experts) const {
  if (layer < 0 || layer >= plan_.num_layers ||
      plan_.config.IsDenseLayer(static_cast<int>(layer))) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch: layer ", layer,
                     layer >= 0 && layer < plan_.num_layers
                         ? " is a dense layer (no routed experts)"
                         : absl::StrCat(" does not exist (the model has ",
                                        plan_.num_layers, " layers)")));
  }
  if (experts.size() > static_cast<size_t>(plan_.num_experts)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch: ", experts.size(), " experts, more than the ",
                     plan_.num_experts, " a layer has"));
  }
  for (uint32_t e : experts) {
    if (e >= static_cast<uint32_t>(plan_.num_experts)) {
      return absl::InvalidArgumentError(
          absl::StrCat("prefetch: layer ", layer, " expert ", e,
                       " does not exist (", plan_.num_experts, " experts)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ExpertCompute::Prefetch(
    int64_t layer, const std::vector<uint32_t>& experts) {
  std::vector<uint32_t> wanted = experts;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<ExpertKey> keys;
  for (uint32_t e : wanted) {
    if (Owns(layer, e)) {
      keys.push_back(
          ExpertKey{static_cast<int32_t>(layer), static_cast<int32_t>(e)});
    }
  }
  if (keys.empty()) return 0u;
  FLOTILLA_RETURN_IF_ERROR(engine_->Prefetch(keys));
  return static_cast<uint32_t>(keys.size());
}

std::string ExpertCompute::StatsLine() const {
  return engine_->stats().ToString();
}

}  // namespace flotilla::expert_worker
