#include "tools/pack_state.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "shared/io/checksum.h"
#include "shared/model/json_util.h"
#include "shared/pack/pack_manifest.h"
#include "tools/pack_io.h"

namespace flotilla::tools {
namespace {

using json = nlohmann::json;

constexpr int kStateVersion = 1;

json RegionsToJson(const std::vector<std::optional<RegionSums>>& regions) {
  json a = json::array();
  for (const auto& r : regions) {
    if (!r) {
      a.push_back(nullptr);
      continue;
    }
    json chunks = json::array();
    for (uint64_t c : r->chunks) chunks.push_back(io::ChecksumHex(c));
    a.push_back({{"checksum", io::ChecksumHex(r->checksum)},
                 {"chunks", std::move(chunks)}});
  }
  return a;
}

bool ParseSum(const json& v, uint64_t* out) {
  if (!v.is_string()) return false;
  absl::StatusOr<uint64_t> sum = io::ParseChecksumHex(v.get<std::string>());
  if (!sum.ok()) return false;
  *out = *sum;
  return true;
}

bool RegionsFromJson(const json& a,
                     std::vector<std::optional<RegionSums>>* out) {
  if (!a.is_array()) return false;
  for (const json& v : a) {
    if (v.is_null()) {
      out->push_back(std::nullopt);
      continue;
    }
    RegionSums r;
    if (!v.is_object() || !v.contains("checksum") ||
        !ParseSum(v["checksum"], &r.checksum) || !v.contains("chunks") ||
        !v["chunks"].is_array()) {
      return false;
    }
    for (const json& c : v["chunks"]) {
      if (!ParseSum(c, &r.chunks.emplace_back())) return false;
    }
    out->push_back(std::move(r));
  }
  return true;
}

json SumsToJson(const std::vector<std::optional<uint64_t>>& sums) {
  json a = json::array();
  for (const auto& s : sums) {
    a.push_back(s ? json(io::ChecksumHex(*s)) : json(nullptr));
  }
  return a;
}

bool SumsFromJson(const json& a, std::vector<std::optional<uint64_t>>* out) {
  if (!a.is_array()) return false;
  for (const json& v : a) {
    if (v.is_null()) {
      out->push_back(std::nullopt);
      continue;
    }
    uint64_t sum = 0;
    if (!ParseSum(v, &sum)) return false;
    out->push_back(sum);
  }
  return true;
}

template <typename T>
size_t CountDone(const std::vector<std::optional<T>>& v) {
  size_t n = 0;
  for (const auto& s : v) n += s.has_value();
  return n;
}

std::string ManifestPlanId(pack::PackManifest m) {
  for (auto& r : m.regions) {
    r.checksum = 0;
    r.chunk_checksums.clear();
  }
  for (auto& e : m.experts) e.checksum = 0;
  m.complete = false;
  const std::string text = pack::EncodePackManifest(m).json;
  return io::ChecksumHex(io::Checksum64(text.data(), text.size()));
}

absl::Status Refuse(const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      why, "; pass --force to overwrite it, or choose another --out"));
}

}  // namespace

size_t PackState::regions_done() const { return CountDone(regions); }
size_t PackState::experts_done() const { return CountDone(experts); }

std::string PackStateToJson(const PackState& s) {
  json j = {{"version", kStateVersion},
            {"fingerprint", s.fingerprint},
            {"plan_id", s.plan_id},
            {"regions", RegionsToJson(s.regions)},
            {"experts", SumsToJson(s.experts)}};
  return j.dump() + "\n";
}

absl::StatusOr<PackState> PackStateFromJson(absl::string_view text,
                                            absl::string_view source) {
  const json j = json::parse(text.begin(), text.end(), nullptr,
                             /*allow_exceptions=*/false);
  PackState s;
  auto str = [&](const char* key, std::string* out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  const bool ok =
      !j.is_discarded() && j.is_object() && j.contains("version") &&
      j["version"] == kStateVersion && str("fingerprint", &s.fingerprint) &&
      str("plan_id", &s.plan_id) && j.contains("regions") &&
      RegionsFromJson(j["regions"], &s.regions) && j.contains("experts") &&
      SumsFromJson(j["experts"], &s.experts);
  if (!ok) {
    return absl::DataLossError(absl::StrCat(
        source,
        " is not a pack progress record of this version; remove the "
        "pack dir (or pass --force) to start over"));
  }
  return s;
}

absl::StatusOr<PackStart> InspectPackDir(const std::string& dir,
                                         const PackPlan& plan, bool force,
                                         FILE* log) {
  const std::string manifest_path = dir + "/" + kManifestFile;
  const std::string state_path = dir + "/" + kStateFile;
  bool have_pack_record = false;
  if (PathExists(manifest_path)) {
    have_pack_record = true;
    absl::StatusOr<pack::PackManifest> m = pack::ReadPackManifest(dir);
    if (!m.ok() && absl::IsFailedPrecondition(m.status())) {
      // Our own pack of an older format version: redo it, as for an older
      // layout below.
      if (log != nullptr) {
        std::fprintf(log, "pack: %s is of an older format version; repacking\n",
                     manifest_path.c_str());
      }
    } else if (!m.ok()) {
      if (!force) return Refuse(std::string(m.status().message()));
    } else if (m->source_fingerprint != plan.fingerprint) {
      if (!force) {
        return Refuse(absl::StrCat(
            dir, " holds a pack of another checkpoint (fingerprint ",
            m->source_fingerprint, "; this model is ", plan.fingerprint, ")"));
      }
    } else if (m->complete && ManifestPlanId(*m) == plan.Id()) {
      return PackStart{true, std::nullopt};
    } else if (log != nullptr) {
      std::fprintf(log, "pack: %s is from an older pack layout; repacking\n",
                   manifest_path.c_str());
    }
  }
  if (PathExists(state_path)) {
    have_pack_record = true;
    absl::StatusOr<std::string> text =
        model::internal::ReadSmallFile(state_path);
    absl::StatusOr<PackState> s =
        text.ok() ? PackStateFromJson(*text, state_path)
                  : absl::StatusOr<PackState>(text.status());
    if (!s.ok()) {
      if (!force) return Refuse(std::string(s.status().message()));
    } else if (s->fingerprint != plan.fingerprint) {
      if (!force) {
        return Refuse(absl::StrCat(
            dir,
            " holds an unfinished pack of another checkpoint"
            " (fingerprint ",
            s->fingerprint, "; this model is ", plan.fingerprint, ")"));
      }
    } else if (s->plan_id == plan.Id() &&
               s->regions.size() == plan.regions.size() &&
               s->experts.size() == plan.experts.size()) {
      return PackStart{false, std::move(*s)};
    } else if (log != nullptr) {
      std::fprintf(log, "pack: %s is for another pack layout; starting over\n",
                   state_path.c_str());
    }
  }
  if (!have_pack_record && !force &&
      (PathExists(dir + "/" + kTrunkFile) ||
       PathExists(dir + "/" + kExpertsFile))) {
    return Refuse(absl::StrCat(dir, " holds pack files but neither ",
                               kManifestFile, " nor ", kStateFile));
  }
  return PackStart{};
}

}  // namespace flotilla::tools
