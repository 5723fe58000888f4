#include "shared/placement/expert_split.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"
#include "shared/placement/placement.h"

namespace flotilla::placement {
namespace {

using nlohmann::json;

constexpr char kSplitFormat[] = "flotilla-split";
constexpr int kSplitVersion = 1;

// Reads a required non-negative integer field no larger than `max`;
// InvalidArgument naming `source` and the field otherwise.
absl::StatusOr<uint64_t> UintField(const json& j, const char* key, uint64_t max,
                                   absl::string_view source) {
  const auto it = j.find(key);
  if (it == j.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": missing \"", key, "\""));
  }
  const bool non_negative =
      it->is_number_unsigned() ||
      (it->is_number_integer() && it->get<int64_t>() >= 0);
  if (!non_negative) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": \"", key, "\" must be a non-negative integer, got ",
        model::internal::DescribeJson(*it)));
  }
  const uint64_t v = it->get<uint64_t>();
  if (v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": \"", key, "\" ", v, " is above ", max));
  }
  return v;
}

}  // namespace

RowRange SliceRows(uint64_t size, int k, int n) {
  if (n < 1 || k < 0 || k >= n) return RowRange{};  // outside the contract
  // k * size fits in 128 bits; sizes here are row counts (far below 2^48),
  // but stay exact for any input.
  const auto at = [&](int i) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(size) *
                                 static_cast<uint64_t>(i) /
                                 static_cast<uint64_t>(n));
  };
  return RowRange{at(k), at(k + 1)};
}

absl::Status ExpertSplit::Validate() const {
  if (workers < 1 || workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "split worker count ", workers, " is outside [1, ", kMaxWorkers, "]"));
  }
  if (worker < 0 || worker >= workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "split worker ", worker, " is outside [0, ", workers, ")"));
  }
  if (intermediate < static_cast<uint64_t>(workers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "intermediate size ", intermediate, " is below the worker count ",
        workers, " (a worker would hold no w1/w3 rows)"));
  }
  if (latent < static_cast<uint64_t>(workers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("latent width ", latent, " is below the worker count ",
                     workers, " (a worker would hold no w2 rows)"));
  }
  return absl::OkStatus();
}

std::string ExpertSplit::ToJson() const {
  nlohmann::ordered_json j;
  j["format"] = kSplitFormat;
  j["version"] = kSplitVersion;
  j["workers"] = workers;
  j["worker"] = worker;
  j["intermediate"] = intermediate;
  j["latent"] = latent;
  j["source_fingerprint"] = source_fingerprint;
  return j.dump() + "\n";
}

absl::StatusOr<ExpertSplit> ExpertSplit::FromJson(absl::string_view text,
                                                  absl::string_view source) {
  FLOTILLA_ASSIGN_OR_RETURN(json j, model::internal::ParseJson(text, source));
  const auto format = j.is_object() ? j.find("format") : j.end();
  if (!j.is_object() || format == j.end() || !format->is_string() ||
      format->get<std::string>() != kSplitFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a split file (expected \"format\": \"",
                     kSplitFormat, "\")"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(const uint64_t version,
                            UintField(j, "version", 1 << 30, source));
  if (version != kSplitVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": split version ", version, " (this build reads ",
                     kSplitVersion, ")"));
  }
  constexpr uint64_t kMaxRows = uint64_t{1} << 40;
  ExpertSplit s;
  FLOTILLA_ASSIGN_OR_RETURN(const uint64_t workers,
                            UintField(j, "workers", kMaxWorkers, source));
  FLOTILLA_ASSIGN_OR_RETURN(const uint64_t worker,
                            UintField(j, "worker", kMaxWorkers, source));
  FLOTILLA_ASSIGN_OR_RETURN(s.intermediate,
                            UintField(j, "intermediate", kMaxRows, source));
  FLOTILLA_ASSIGN_OR_RETURN(s.latent, UintField(j, "latent", kMaxRows, source));
  s.workers = static_cast<int>(workers);
  s.worker = static_cast<int>(worker);
  if (s.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": \"workers\" must be at least 1"));
  }
  if (s.worker >= s.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": \"worker\" ", s.worker,
                     " is not below \"workers\" ", s.workers));
  }
  for (const auto& [key, size] :
       {std::pair<const char*, uint64_t>{"intermediate", s.intermediate},
        std::pair<const char*, uint64_t>{"latent", s.latent}}) {
    if (size < workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": \"", key, "\" ", size, " is below \"workers\" ", s.workers,
          " (a worker would hold no rows)"));
    }
  }
  const auto fp = j.find("source_fingerprint");
  if (fp == j.end() || !fp->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": \"source_fingerprint\" must be a string"));
  }
  s.source_fingerprint = fp->get<std::string>();
  // Anything the checks above missed (kept in one place: Validate).
  if (absl::Status v = s.Validate(); !v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", v.message()));
  }
  return s;
}

absl::StatusOr<ExpertSplit> ExpertSplit::Load(const std::string& path) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            model::internal::ReadSmallFile(path));
  return FromJson(text, path);
}

}  // namespace flotilla::placement
