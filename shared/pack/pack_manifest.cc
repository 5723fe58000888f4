#include "shared/pack/pack_manifest.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/family/family.h"
#include "shared/io/checksum.h"
#include "shared/model/json_util.h"
#include "shared/pack/expert_table.h"
#include "shared/pack/pack_manifest_reader.h"

namespace flotilla::pack {

using model::MoeSpec;
namespace {

using json = nlohmann::json;
using internal::Hex64;
using internal::IsSafeRelativePath;
using internal::ParseHex64;
using internal::Reader;

// Trunk regions and packed expert runs are read with O_DIRECT.
constexpr uint64_t kAlign = 4096;

// dump() throws on invalid UTF-8 (a shard name, say); replacing the bad
// bytes keeps serialisation exception-free.
std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json RegionToJson(const PackRegion& r) {
  json layout = json::parse(LayoutToJson(r.layout));
  json chunks = json::array();
  for (uint64_t c : r.chunk_checksums) chunks.push_back(Hex64(c));
  return {{"kind", r.kind},
          {"layer", r.layer},
          {"offset", r.offset},
          {"size", r.size},
          {"checksum", Hex64(r.checksum)},
          {"layout", std::move(layout)},
          {"chunk_rows", r.chunk_rows},
          {"chunk_checksums", std::move(chunks)}};
}

// chunk_rows / chunk_checksums: only vocab regions carry them, one checksum
// per chunk_rows rows of the matrix.
void ParseChunks(Reader& rd, const json& j, const std::string& where,
                 PackRegion* r) {
  const json& chunks = *j.find("chunk_checksums");
  const std::string at = Reader::Path(where, "chunk_checksums");
  if (!chunks.is_array()) return rd.Fail(at, "expected an array");
  for (const json& c : chunks) {
    uint64_t v = 0;
    if (!c.is_string() || !ParseHex64(c.get<std::string>(), &v)) {
      return rd.Fail(at, "expected 16 lower-case hex digits each");
    }
    r->chunk_checksums.push_back(v);
  }
  if (r->chunk_rows == 0) {
    if (!r->chunk_checksums.empty()) {
      rd.Fail(at, "chunk checksums without chunk_rows");
    }
    return;
  }
  if (r->kind != "embed" && r->kind != "lm_head") {
    return rd.Fail(Reader::Path(where, "chunk_rows"),
                   "only embed and lm_head regions have chunks");
  }
  const RegionField* matrix = r->layout.Find("matrix");
  const uint64_t rows =
      matrix != nullptr && matrix->shape.size() == 2 && matrix->shape[0] > 0
          ? static_cast<uint64_t>(matrix->shape[0])
          : 0;
  if (rows == 0) {
    return rd.Fail(Reader::Path(where, "layout"),
                   "a chunked region needs a 2-D \"matrix\" field inside it");
  }
  const uint64_t want = (rows + r->chunk_rows - 1) / r->chunk_rows;
  if (r->chunk_checksums.size() != want) {
    rd.Fail(at,
            absl::StrCat(r->chunk_checksums.size(), " checksums; ", rows,
                         " rows in chunks of ", r->chunk_rows, " need ", want));
  }
}

void ParseRegion(Reader& rd, const json& j, const std::string& where,
                 PackRegion* r) {
  if (!rd.Object(j, where,
                 {"kind", "layer", "offset", "size", "checksum", "layout",
                  "chunk_rows", "chunk_checksums"})) {
    return;
  }
  r->kind = rd.String(j, where, "kind");
  r->layer = rd.Int(j, where, "layer");
  r->offset = rd.U64(j, where, "offset");
  r->size = rd.U64(j, where, "size");
  r->checksum = rd.Checksum(j, where, "checksum");
  r->chunk_rows = rd.U64(j, where, "chunk_rows");
  if (!rd.ok()) return;
  const json& layout = *j.find("layout");
  if (!layout.is_object()) {
    return rd.Fail(Reader::Path(where, "layout"), "expected an object");
  }
  absl::StatusOr<RegionLayout> parsed = LayoutFromJson(Dump(layout));
  if (!parsed.ok()) {
    return rd.Fail(Reader::Path(where, "layout"),
                   std::string(parsed.status().message()));
  }
  r->layout = *std::move(parsed);
  if (r->layout.size != r->size) {
    return rd.Fail(Reader::Path(where, "layout"),
                   absl::StrCat("size does not match the region's ", r->size));
  }
  const bool is_layer = r->kind == "layer";
  if (!is_layer && r->kind != "embed" && r->kind != "lm_head" &&
      r->kind != "globals") {
    return rd.Fail(Reader::Path(where, "kind"),
                   absl::StrCat("unknown region kind \"", r->kind, "\""));
  }
  if (is_layer ? r->layer < 0 : r->layer != -1) {
    return rd.Fail(Reader::Path(where, "layer"),
                   is_layer ? "must be >= 0" : "must be -1 for this kind");
  }
  if (r->size == 0 || r->offset % kAlign != 0 || r->size % kAlign != 0 ||
      r->offset > UINT64_MAX - r->size) {
    return rd.Fail(where,
                   absl::StrCat("offset ", r->offset, " and size ", r->size,
                                " must be multiples of 4096, size > 0"));
  }
  ParseChunks(rd, j, where, r);
}

// Cross-field checks: regions against the config and each other.
void CheckRegions(Reader& rd, const PackManifest& m, const MoeSpec& c) {
  std::set<std::pair<std::string, int>> seen;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (size_t i = 0; i < m.regions.size() && rd.ok(); ++i) {
    const PackRegion& r = m.regions[i];
    const std::string where = absl::StrCat("regions[", i, "]");
    if (r.kind == "layer" && r.layer >= c.num_layers) {
      return rd.Fail(where, absl::StrCat("layer ", r.layer, " >= the config's ",
                                         c.num_layers, " layers"));
    }
    if (!seen.insert({r.kind, r.layer}).second) {
      return rd.Fail(where,
                     absl::StrCat("duplicate region ", r.kind, " ", r.layer));
    }
    spans.push_back({r.offset, r.offset + r.size});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size() && rd.ok(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return rd.Fail("regions", absl::StrCat("regions overlap at offset ",
                                             spans[i].first));
    }
  }
  if (m.complete && rd.ok()) {
    const size_t want = static_cast<size_t>(c.num_layers) + 3;
    if (m.regions.size() != want || !seen.count({"embed", -1}) ||
        !seen.count({"lm_head", -1}) || !seen.count({"globals", -1})) {
      return rd.Fail("regions",
                     absl::StrCat("a complete pack needs every layer plus "
                                  "embed, lm_head and globals (",
                                  want, " regions); found ", m.regions.size()));
    }
  }
}

// Experts against the config, the expert files and each other; `rd` names
// the expert table.
void CheckExperts(Reader& rd, const PackManifest& m, const MoeSpec& c) {
  std::vector<std::tuple<int, uint64_t, uint64_t>> runs;
  for (size_t i = 0; i < m.experts.size() && rd.ok(); ++i) {
    const PackExpert& e = m.experts[i];
    const std::string where = absl::StrCat("record ", i, " (layer ", e.layer,
                                           ", expert ", e.expert, ")");
    if (e.layer < 0 || e.layer >= c.num_layers || c.IsDenseLayer(e.layer)) {
      return rd.Fail(where,
                     absl::StrCat("layer ", e.layer, " is not an MoE layer"));
    }
    if (e.expert < 0 || e.expert >= c.num_experts) {
      return rd.Fail(where, absl::StrCat("expert ", e.expert, " outside 0..",
                                         c.num_experts - 1));
    }
    if (e.file < 0 || static_cast<size_t>(e.file) >= m.expert_files.size()) {
      return rd.Fail(where,
                     absl::StrCat("file index ", e.file, " but ",
                                  m.expert_files.size(), " expert files"));
    }
    if (!m.experts_in_model_dir && e.offset % kAlign != 0) {
      return rd.Fail(where, "packed expert runs must start 4096-aligned");
    }
    if (i > 0 &&
        std::make_pair(m.experts[i - 1].layer, m.experts[i - 1].expert) >=
            std::make_pair(e.layer, e.expert)) {
      return rd.Fail(where,
                     "experts must be sorted by (layer, expert) "
                     "without duplicates");
    }
    runs.emplace_back(e.file, e.offset, e.offset + e.length);
  }
  std::sort(runs.begin(), runs.end());
  for (size_t i = 1; i < runs.size() && rd.ok(); ++i) {
    if (std::get<0>(runs[i]) == std::get<0>(runs[i - 1]) &&
        std::get<1>(runs[i]) < std::get<2>(runs[i - 1])) {
      return rd.Fail("experts",
                     absl::StrCat("expert runs overlap in ",
                                  m.expert_files[std::get<0>(runs[i])],
                                  " at offset ", std::get<1>(runs[i])));
    }
  }
}

}  // namespace

const PackRegion* PackManifest::FindLayer(int layer) const {
  for (const PackRegion& r : regions) {
    if (r.kind == "layer" && r.layer == layer) return &r;
  }
  return nullptr;
}

const PackRegion* PackManifest::FindRegion(absl::string_view kind) const {
  for (const PackRegion& r : regions) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

const PackExpert* PackManifest::FindExpert(int layer, int expert) const {
  // `experts` is sorted by (layer, expert) (validated at load).
  auto it = std::lower_bound(
      experts.begin(), experts.end(), std::make_pair(layer, expert),
      [](const PackExpert& e, const std::pair<int, int>& key) {
        return std::make_pair(e.layer, e.expert) < key;
      });
  if (it == experts.end() || it->layer != layer || it->expert != expert) {
    return nullptr;
  }
  return &*it;
}

EncodedPackManifest EncodePackManifest(const PackManifest& m) {
  EncodedPackManifest out;
  out.expert_table = EncodeExpertTable(m.experts);
  // One region per line keeps the file greppable without pretty-printing
  // every field.
  std::string& text = out.json;
  text = "{\n";
  auto field = [&](const char* key, const json& value) {
    absl::StrAppend(&text, " ", Dump(json(key)), ": ", Dump(value), ",\n");
  };
  field("version", m.version);
  field("complete", m.complete);
  field("source_fingerprint", m.source_fingerprint);
  field("source_stamp", m.source_stamp);
  field("source_shards", m.source_shards);
  field("trunk_file", m.trunk_file);
  field("expert_format", m.expert_format);
  field("experts_in_model_dir", m.experts_in_model_dir);
  field("expert_files", m.expert_files);
  field("expert_count", m.experts.size());
  field(
      "expert_table_checksum",
      Hex64(io::Checksum64(out.expert_table.data(), out.expert_table.size())));
  field("config_json", m.config_json);
  absl::StrAppend(&text, " \"regions\": [");
  for (size_t i = 0; i < m.regions.size(); ++i) {
    absl::StrAppend(&text, i ? ",\n  " : "\n  ",
                    Dump(RegionToJson(m.regions[i])));
  }
  absl::StrAppend(&text, m.regions.empty() ? "]\n" : "\n ]\n");
  text += "}\n";
  return out;
}

absl::StatusOr<PackManifest> DecodePackManifest(absl::string_view text,
                                                absl::string_view table,
                                                absl::string_view dir) {
  const std::string source = absl::StrCat(dir, "/manifest.json");
  const std::string table_source = absl::StrCat(dir, "/", kExpertTableFile);
  FLOTILLA_ASSIGN_OR_RETURN(json j, model::internal::ParseJson(text, source));
  Reader rd{source};
  PackManifest m;
  // The version first: a manifest of another version has other fields, and
  // "re-run pack" is the useful answer, not "unknown field".
  if (j.is_object() && j.contains("version")) {
    m.version = rd.Int(j, "", "version");
    if (rd.ok() && m.version != kPackFormatVersion) {
      return absl::FailedPreconditionError(
          absl::StrCat("pack manifest ", source, " has format version ",
                       m.version, "; this build reads version ",
                       kPackFormatVersion, " (re-run flotilla-tool pack)"));
    }
  }
  if (!rd.Object(j, "",
                 {"version", "complete", "source_fingerprint", "source_stamp",
                  "source_shards", "trunk_file", "expert_format",
                  "experts_in_model_dir", "expert_files", "expert_count",
                  "expert_table_checksum", "config_json", "regions"})) {
    return rd.status();
  }
  m.complete = rd.Bool(j, "", "complete");
  m.source_fingerprint = rd.String(j, "", "source_fingerprint");
  m.source_stamp = rd.String(j, "", "source_stamp");
  m.trunk_file = rd.String(j, "", "trunk_file");
  m.expert_format = rd.String(j, "", "expert_format");
  m.experts_in_model_dir = rd.Bool(j, "", "experts_in_model_dir");
  m.config_json = rd.String(j, "", "config_json");
  const uint64_t expert_count = rd.U64(j, "", "expert_count");
  const uint64_t table_checksum = rd.Checksum(j, "", "expert_table_checksum");
  if (!rd.ok()) return rd.status();
  uint64_t unused;
  if (!ParseHex64(m.source_fingerprint, &unused)) {
    rd.Fail("source_fingerprint", "expected 16 lower-case hex digits");
  } else if (!ParseHex64(m.source_stamp, &unused)) {
    rd.Fail("source_stamp", "expected 16 lower-case hex digits");
  } else if (!IsSafeRelativePath(m.trunk_file)) {
    rd.Fail("trunk_file", "expected a relative path inside the pack dir");
  } else if (m.expert_format != "mxfp4" && m.expert_format != "bf16" &&
             m.expert_format != "f32" && m.expert_format != "fp8_e4m3" &&
             m.expert_format != "mxfp4_bias") {
    rd.Fail("expert_format",
            absl::StrCat("unknown format \"", m.expert_format, "\""));
  }
  for (const char* key : {"expert_files", "source_shards"}) {
    const json& files = j[key];
    if (rd.ok() && !files.is_array()) rd.Fail(key, "expected an array");
    auto& out = key[0] == 'e' ? m.expert_files : m.source_shards;
    for (size_t i = 0; rd.ok() && i < files.size(); ++i) {
      if (!files[i].is_string() ||
          !IsSafeRelativePath(files[i].get<std::string>())) {
        rd.Fail(absl::StrCat(key, "[", i, "]"),
                "expected a relative path without '..'");
      } else {
        out.push_back(files[i].get<std::string>());
      }
    }
  }
  if (rd.ok() && !j["regions"].is_array())
    rd.Fail("regions", "expected an array");
  for (size_t i = 0; rd.ok() && i < j["regions"].size(); ++i) {
    ParseRegion(rd, j["regions"][i], absl::StrCat("regions[", i, "]"),
                &m.regions.emplace_back());
  }
  if (!rd.ok()) return rd.status();
  // Whichever family the config is (model_type), its expert grid.
  absl::StatusOr<MoeSpec> config = family::ParseMoeSpec(
      m.config_json, absl::StrCat(source, " (config_json)"));
  if (!config.ok()) return config.status();
  CheckRegions(rd, m, *config);
  if (!rd.ok()) return rd.status();

  const uint64_t got = io::Checksum64(table.data(), table.size());
  if (got != table_checksum) {
    return absl::DataLossError(absl::StrCat(
        "expert table ", table_source, " has XXH3-64 ", Hex64(got), " but ",
        source, " records ", Hex64(table_checksum),
        " (a torn write or another pack's table; re-run flotilla-tool pack)"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(m.experts, DecodeExpertTable(table, table_source));
  if (m.experts.size() != expert_count) {
    return absl::DataLossError(
        absl::StrCat("expert table ", table_source, " holds ", m.experts.size(),
                     " experts but ", source, " records ", expert_count));
  }
  Reader table_rd{table_source};
  CheckExperts(table_rd, m, *config);
  if (!table_rd.ok()) return table_rd.status();
  return m;
}

absl::StatusOr<PackManifest> ReadPackManifest(const std::string& pack_dir) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text, model::internal::ReadSmallFile(
                                                  pack_dir + "/manifest.json"));
  // A manifest of an older version has no table; say so before looking.
  std::string table;
  const std::string table_path = pack_dir + "/" + kExpertTableFile;
  if (absl::StatusOr<std::string> t =
          model::internal::ReadSmallFile(table_path);
      t.ok()) {
    table = *std::move(t);
  } else {
    absl::StatusOr<PackManifest> m = DecodePackManifest(text, "", pack_dir);
    if (!m.ok() && absl::IsFailedPrecondition(m.status())) return m.status();
    return t.status();
  }
  return DecodePackManifest(text, table, pack_dir);
}

absl::StatusOr<PackManifest> LoadPackManifest(const std::string& pack_dir) {
  FLOTILLA_ASSIGN_OR_RETURN(PackManifest m, ReadPackManifest(pack_dir));
  // An interrupted pack leaves unwritten regions; serving from it would
  // compute on zeros.
  if (!m.complete) {
    return absl::FailedPreconditionError(
        absl::StrCat(pack_dir,
                     "/manifest.json describes an unfinished pack; re-run "
                     "flotilla-tool pack"));
  }
  return m;
}

}  // namespace flotilla::pack
