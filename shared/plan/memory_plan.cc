#include "shared/plan/memory_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "shared/io/aligned_buffer.h"

namespace flotilla::plan {
namespace {

// Decimal units, as disk and bandwidth figures are quoted.
std::string Gb(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return absl::StrFormat("%.3f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.2f MB", b / 1e6);
  return absl::StrFormat("%.1f KB", b / 1e3);
}

}  // namespace

uint64_t LmHeadPassRows(uint64_t vocab, uint64_t row_bytes, uint64_t chunk_rows,
                        uint64_t pass_bytes) {
  const uint64_t want = std::max<uint64_t>(
      chunk_rows, pass_bytes / row_bytes / chunk_rows * chunk_rows);
  return std::min(want, (vocab + chunk_rows - 1) / chunk_rows * chunk_rows);
}

uint64_t RowSpanBytes(uint64_t rows, uint64_t row_bytes) {
  return io::AlignUp(rows * row_bytes) + io::kDirectIoAlignment;
}

uint64_t LmHeadPassBufferBytes(uint64_t vocab, uint64_t row_bytes,
                               uint64_t chunk_rows, uint64_t pass_bytes) {
  return 2 *
         RowSpanBytes(LmHeadPassRows(vocab, row_bytes, chunk_rows, pass_bytes),
                      row_bytes);
}

uint64_t MemoryPlan::open_bytes() const {
  uint64_t total = 0;
  for (const auto& [owner, bytes] : charges) {
    if (owner != "sequence_state" && owner != "workspace" &&
        owner != "serve.prefix_cache") {
      total += bytes;
    }
  }
  return total;
}

double MemoryPlan::predicted_io_seconds_per_token() const {
  return disk_bytes_per_second > 0
             ? static_cast<double>(read_bytes_per_token()) /
                   disk_bytes_per_second
             : 0;
}

absl::StatusOr<MemoryPlan> MakeMemoryPlan(const PlanInputs& in) {
  const model::ModelShape& shape = in.shape;
  MemoryPlan plan;
  plan.budget_bytes = in.budget_bytes;
  plan.num_layers = shape.num_layers;
  plan.disk_bytes_per_second = in.disk_bytes_per_second;
  const int layers = shape.num_layers;
  if (in.layer_region_bytes.size() != static_cast<size_t>(layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory plan: ", in.layer_region_bytes.size(),
                     " layer region sizes for a model of ", layers, " layers"));
  }
  if (in.stream_vocab && !shape.streams_vocab) {
    return absl::InvalidArgumentError(
        "--stream-vocab: this model's forward pass reads its embedding and "
        "lm_head whole, so they cannot be streamed");
  }
  uint64_t max_region = 0;
  for (uint64_t b : in.layer_region_bytes) max_region = std::max(max_region, b);

  // The minimum working set: state for the full context, buffers of one
  // prefill chunk, two ring slots, expert buffers for one token's experts,
  // a verified chunk of embedding rows and the lm_head's pass buffers (given
  // back below if the lm_head is pinned).
  const int moe_layers = std::clamp(shape.moe_layers, 0, layers);
  // A sequence never holds more positions than the model reaches.
  const int positions = shape.max_positions > 0
                            ? std::min(in.max_context, shape.max_positions)
                            : in.max_context;
  plan.expert_slot_bytes = in.expert_run_bytes;
  plan.expert_slots =
      in.expert_slots > 0 ? in.expert_slots : shape.experts_per_token;
  std::vector<std::pair<std::string, uint64_t>> fixed = {
      {"process.baseline", in.process_baseline_bytes},
      {"metadata", in.metadata_bytes},
      {"sequence_state", static_cast<uint64_t>(std::max(1, in.sequences)) *
                             shape.SequenceStateBytes(positions)},
      {"workspace", shape.WorkspaceBytes(in.prefill_chunk)},
      {"tokenizer", in.tokenizer_bytes},
      {"trunk.globals", in.globals_bytes},
      {"experts.read_buffers", plan.expert_slot_bytes * plan.expert_slots},
  };
  if (shape.streams_vocab) {
    fixed.push_back({"vocab.chunk_buffers", in.vocab_chunk_bytes});
    fixed.push_back({"lm_head.stream_buffers", in.lm_head_stream_bytes});
  } else {
    // The forward pass reads both whole: part of the minimum.
    fixed.push_back({"lm_head", in.vocab_region_bytes});
    fixed.push_back({"embedding", in.vocab_region_bytes});
    plan.lm_head_pinned = true;
    plan.embed_pinned = true;
  }
  if (in.prefix_cache_bytes > 0) {
    fixed.push_back({"serve.prefix_cache", in.prefix_cache_bytes});
  }
  uint64_t used = 0;
  for (const auto& [owner, bytes] : fixed) used += bytes;
  const uint64_t ring_min = layers > 0 ? 2 * max_region : 0;
  if (used + ring_min > in.budget_bytes) {
    std::string parts;
    for (const auto& [owner, bytes] : fixed) {
      absl::StrAppend(&parts, " ", owner, "=", Gb(bytes));
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory budget ", Gb(in.budget_bytes), " is below the minimum ",
        Gb(used + ring_min), " (", parts.substr(1),
        " trunk.ring=", Gb(ring_min), " for 2 slots of the largest layer)"));
  }
  plan.charges = fixed;

  // Pin the trunk prefix while the rest (ring of 2 slots over the remaining
  // layers) still fits; pinning every layer frees the ring.
  uint64_t pinned = 0;
  int p = 0;
  const int max_pinned = in.max_pinned_layers >= 0
                             ? std::min(in.max_pinned_layers, layers)
                             : layers;
  for (; p < max_pinned; ++p) {
    uint64_t rest_max = 0;
    for (int l = p + 1; l < layers; ++l) {
      rest_max = std::max(rest_max, in.layer_region_bytes[l]);
    }
    const uint64_t ring = p + 1 < layers ? 2 * rest_max : 0;
    if (used + pinned + in.layer_region_bytes[p] + ring > in.budget_bytes) {
      break;
    }
    pinned += in.layer_region_bytes[p];
  }
  plan.pinned_layers = p;
  uint64_t unpinned_max = 0, unpinned_total = 0;
  for (int l = p; l < layers; ++l) {
    unpinned_max = std::max(unpinned_max, in.layer_region_bytes[l]);
    unpinned_total += in.layer_region_bytes[l];
  }
  used += pinned;
  plan.charges.push_back({"trunk.pinned_layers", pinned});
  if (p < layers) {
    // More slots than 2 let the reader run further ahead; take up to 4 when
    // memory allows (beyond that the disk, not the ring, is the limit).
    plan.ring_slot_bytes = unpinned_max;
    plan.ring_slots = 2;
    while (plan.ring_slots < std::min(4, layers - p) &&
           used + (plan.ring_slots + 1) * unpinned_max <= in.budget_bytes) {
      ++plan.ring_slots;
    }
    used += plan.ring_slots * unpinned_max;
    plan.charges.push_back(
        {"trunk.ring", static_cast<uint64_t>(plan.ring_slots) * unpinned_max});
  }
  if (shape.streams_vocab && !in.stream_vocab &&
      used - in.lm_head_stream_bytes + in.vocab_region_bytes <=
          in.budget_bytes) {
    // A pinned lm_head needs no pass buffers.
    plan.lm_head_pinned = true;
    used += in.vocab_region_bytes - in.lm_head_stream_bytes;
    std::erase_if(plan.charges, [](const auto& charge) {
      return charge.first == "lm_head.stream_buffers";
    });
    plan.charges.push_back({"lm_head", in.vocab_region_bytes});
  }
  if (shape.streams_vocab && !in.stream_vocab &&
      used + in.vocab_region_bytes <= in.budget_bytes) {
    plan.embed_pinned = true;
    used += in.vocab_region_bytes;
    plan.charges.push_back({"embedding", in.vocab_region_bytes});
  }
  // Every routed expert, when the family asks for it and the rest holds them.
  const uint64_t all_experts = static_cast<uint64_t>(moe_layers) *
                               shape.num_experts * plan.expert_slot_bytes;
  const bool cache_all = shape.cache_experts_when_all_fit &&
                         in.expert_cache_bytes == 0 && all_experts > 0 &&
                         used + all_experts <= in.budget_bytes;
  if (cache_all) {
    plan.expert_cache_slots = moe_layers * shape.num_experts;
    used += all_experts;
    plan.charges.push_back({"experts.cache", all_experts});
  } else if (in.expert_cache_bytes > 0 && plan.expert_slot_bytes > 0) {
    const uint64_t room = in.budget_bytes - used;
    const uint64_t want = std::min(in.expert_cache_bytes, room);
    plan.expert_cache_slots = static_cast<int>(want / plan.expert_slot_bytes);
    const uint64_t cache = plan.expert_cache_slots * plan.expert_slot_bytes;
    used += cache;
    plan.charges.push_back({"experts.cache", cache});
  }
  plan.total_bytes = used;
  plan.trunk_read_bytes = unpinned_total;
  plan.lm_head_bytes = in.vocab_region_bytes;
  for (uint64_t b : in.layer_region_bytes) plan.trunk_layer_bytes += b;
  plan.lm_head_read_bytes = plan.lm_head_pinned ? 0 : in.vocab_region_bytes;
  plan.embed_read_bytes = plan.embed_pinned ? 0 : in.vocab_chunk_bytes;
  // Once warm, a cache of every expert reads none.
  plan.expert_read_bytes = cache_all ? 0
                                     : static_cast<uint64_t>(moe_layers) *
                                           shape.experts_per_token *
                                           in.expert_run_bytes;
  return plan;
}

std::string MemoryPlan::ToJson() const {
  nlohmann::json j;
  j["budget_bytes"] = budget_bytes;
  j["total_bytes"] = total_bytes;
  j["num_layers"] = num_layers;
  j["pinned_layers"] = pinned_layers;
  j["ring_slots"] = ring_slots;
  j["ring_slot_bytes"] = ring_slot_bytes;
  j["lm_head_pinned"] = lm_head_pinned;
  j["embed_pinned"] = embed_pinned;
  j["expert_slots"] = expert_slots;
  j["expert_slot_bytes"] = expert_slot_bytes;
  j["expert_cache_slots"] = expert_cache_slots;
  for (const auto& [owner, bytes] : charges) j["charges"][owner] = bytes;
  j["read_bytes_per_token"] = {{"trunk", trunk_read_bytes},
                               {"lm_head", lm_head_read_bytes},
                               {"embedding", embed_read_bytes},
                               {"experts", expert_read_bytes},
                               {"total", read_bytes_per_token()}};
  j["disk_bytes_per_second"] = disk_bytes_per_second;
  j["predicted_io_seconds_per_token"] = predicted_io_seconds_per_token();
  return j.dump();
}

std::string MemoryPlan::ToString() const {
  std::string s =
      absl::StrFormat("memory plan (budget %s):\n", Gb(budget_bytes));
  for (const auto& [owner, bytes] : charges) {
    absl::StrAppendFormat(&s, "  %-22s %s\n", owner, Gb(bytes));
  }
  absl::StrAppendFormat(&s, "  %-22s %s\n", "total", Gb(total_bytes));
  absl::StrAppendFormat(
      &s,
      "  trunk: %d of %d layers pinned, ring %d x %s; lm_head %s; "
      "embedding %s\n",
      pinned_layers, num_layers, ring_slots, Gb(ring_slot_bytes),
      lm_head_pinned ? "pinned" : "streamed in chunks",
      embed_pinned ? "pinned" : "rows read on demand");
  absl::StrAppendFormat(&s, "  experts: %d read buffers x %s, cache %d slots\n",
                        expert_slots, Gb(expert_slot_bytes),
                        expert_cache_slots);
  absl::StrAppendFormat(
      &s,
      "  per token read: trunk %s + lm_head %s + embedding %s + experts %s "
      "= %s\n",
      Gb(trunk_read_bytes), Gb(lm_head_read_bytes), Gb(embed_read_bytes),
      Gb(expert_read_bytes), Gb(read_bytes_per_token()));
  absl::StrAppendFormat(
      &s, "  predicted I/O time per token at %.2f GB/s: %.2f s\n",
      disk_bytes_per_second / 1e9, predicted_io_seconds_per_token());
  return s;
}

}  // namespace flotilla::plan
