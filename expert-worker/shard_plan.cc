#include "expert-worker/shard_plan.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/base/status_macros.h"
#include "shared/model/config.h"

namespace flotilla::expert_worker {
namespace {

namespace fs = std::filesystem;

// A safetensors header is a JSON table of tensor names and offsets; real
// checkpoints have headers of a few MB. Anything above this is a corrupt or
// foreign file, and we refuse rather than allocate what it claims.
constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{256} << 20;

absl::StatusOr<std::string> ReadWholeFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (in.bad())
    return absl::DataLossError(absl::StrCat("cannot read ", path.string()));
  return bytes;
}

// Returns the 8-byte length prefix and JSON header of a safetensors file.
absl::StatusOr<std::string> ReadSafetensorsHeader(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  unsigned char prefix[8];
  if (!in.read(reinterpret_cast<char*>(prefix), sizeof(prefix))) {
    return absl::DataLossError(
        absl::StrCat(path.string(), ": shorter than a safetensors header"));
  }
  uint64_t header_bytes = 0;  // little-endian on disk, whatever the host
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | prefix[i];
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return absl::DataLossError(absl::StrCat(path.string(), ": header of ",
                                            header_bytes,
                                            " bytes is not plausible"));
  }
  std::string out(reinterpret_cast<const char*>(prefix), sizeof(prefix));
  out.resize(sizeof(prefix) + header_bytes);
  if (!in.read(out.data() + sizeof(prefix),
               static_cast<std::streamsize>(header_bytes))) {
    return absl::DataLossError(
        absl::StrCat(path.string(), ": truncated safetensors header"));
  }
  return out;
}

// Feeds a length-prefixed section so that no two different sequences of
// sections hash the same concatenated bytes.
void HashSection(XXH3_state_t* state, absl::string_view bytes) {
  const uint64_t n = bytes.size();
  XXH3_64bits_update(state, &n, sizeof(n));
  XXH3_64bits_update(state, bytes.data(), bytes.size());
}

}  // namespace

absl::StatusOr<ShardSpec> ParseShardSpec(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  ShardSpec spec;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &spec.index) ||
      !absl::SimpleAtoi(parts[1], &spec.count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected K/N (shard K of N, zero-based K), got '", text, "'"));
  }
  if (spec.count < 1 || spec.index < 0 || spec.index >= spec.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard '", text, "' needs N >= 1 and 0 <= K < N"));
  }
  return spec;
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < rest.size() &&
         absl::ascii_isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  uint64_t value = 0;
  if (digits == 0 || !absl::SimpleAtoi(rest.substr(0, digits), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a byte size such as 8G, 512M or 1073741824, got '", text,
        "'"));
  }
  std::string suffix = absl::AsciiStrToUpper(rest.substr(digits));
  int shift = 0;
  if (!suffix.empty()) {
    const std::string unit = suffix.substr(0, 1);
    const std::string tail = suffix.substr(1);
    if (unit == "B" && tail.empty()) {
      shift = 0;
    } else if (tail.empty() || tail == "B" || tail == "IB") {
      if (unit == "K")
        shift = 10;
      else if (unit == "M")
        shift = 20;
      else if (unit == "G")
        shift = 30;
      else if (unit == "T")
        shift = 40;
      else
        shift = -1;
    } else {
      shift = -1;
    }
    if (shift < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown size suffix in '", text, "' (use K, M, G or T)"));
    }
  }
  if (value == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size must be > 0, got '", text, "'"));
  }
  if (value >
      (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) >> shift)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size '", text, "' is too large"));
  }
  return value << shift;
}

std::vector<uint32_t> OwnedExperts(const ShardSpec& shard, int num_experts) {
  std::vector<uint32_t> experts;
  for (int e = shard.index; e < num_experts; e += shard.count) {
    experts.push_back(static_cast<uint32_t>(e));
  }
  return experts;
}

absl::StatusOr<std::string> ModelFingerprint(const std::string& model_dir) {
  const fs::path dir(model_dir);
  std::error_code ec;
  std::vector<fs::path> shards;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".safetensors") {
      shards.push_back(entry.path());
    }
  }
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot list ", model_dir, ": ", ec.message()));
  }
  // Directory order is unspecified; name order makes the hash stable.
  std::sort(shards.begin(), shards.end());

  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return absl::ResourceExhaustedError("XXH3 state");
  XXH3_64bits_reset(state);
  absl::Status status = [&]() -> absl::Status {
    FLOTILLA_ASSIGN_OR_RETURN(std::string config,
                              ReadWholeFile(dir / "config.json"));
    HashSection(state, config);
    const fs::path index = dir / "model.safetensors.index.json";
    if (fs::exists(index, ec)) {
      FLOTILLA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(index));
      HashSection(state, text);
    }
    for (const fs::path& shard : shards) {
      HashSection(state, shard.filename().string());
      const uintmax_t size = fs::file_size(shard, ec);
      if (ec) {
        return absl::NotFoundError(
            absl::StrCat("cannot stat ", shard.string(), ": ", ec.message()));
      }
      HashSection(state, absl::StrCat(size));
      FLOTILLA_ASSIGN_OR_RETURN(std::string header,
                                ReadSafetensorsHeader(shard));
      HashSection(state, header);
    }
    return absl::OkStatus();
  }();
  const uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!status.ok()) return status;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(digest));
  return absl::StrCat("cfg-xxh3:", hex);
}

absl::StatusOr<ShardPlan> BuildShardPlan(const std::string& model_dir,
                                         const ShardSpec& shard,
                                         uint64_t memory_budget_bytes,
                                         int compute_threads) {
  FLOTILLA_ASSIGN_OR_RETURN(
      model::K3Config config,
      model::LoadK3Config((fs::path(model_dir) / "config.json").string()));
  if (shard.count > config.num_experts) {
    // Some shard would own nothing at all: almost surely a typo in --shard.
    // OutOfRange (not InvalidArgument) so callers can blame the shard, not
    // the checkpoint.
    return absl::OutOfRangeError(
        absl::StrCat("shard count ", shard.count, " exceeds the model's ",
                     config.num_experts, " experts per layer"));
  }
  ShardPlan plan;
  plan.shard = shard;
  plan.num_layers = config.num_hidden_layers;
  plan.num_experts = config.num_experts;
  plan.row_width = config.routed_expert_hidden_size;
  plan.memory_budget_bytes = memory_budget_bytes;
  plan.compute_threads = compute_threads;
  const std::vector<uint32_t> experts = OwnedExperts(shard, config.num_experts);
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    if (config.IsDenseLayer(layer)) continue;
    plan.owned_experts[layer] = experts;
  }
  FLOTILLA_ASSIGN_OR_RETURN(plan.model_fingerprint,
                            ModelFingerprint(model_dir));
  return plan;
}

std::string DescribeShardPlan(const ShardPlan& plan) {
  size_t owned = 0;
  for (const auto& [layer, experts] : plan.owned_experts) {
    owned += experts.size();
  }
  return absl::StrCat(
      "shard ", plan.shard.index, "/", plan.shard.count, "\n",  //
      "model fingerprint ", plan.model_fingerprint, "\n",       //
      "layers ", plan.num_layers, " (", plan.owned_experts.size(),
      " MoE), experts per layer ", plan.num_experts, ", row width ",
      plan.row_width, "\n",  //
      "owned (layer, expert) pairs ", owned, " (experts e with e mod ",
      plan.shard.count, " == ", plan.shard.index, ")\n",  //
      "memory budget ", plan.memory_budget_bytes, " bytes, compute threads ",
      plan.compute_threads, "\n");
}

}  // namespace flotilla::expert_worker
