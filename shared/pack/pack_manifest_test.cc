#include "shared/pack/pack_manifest.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/io/checksum.h"
#include "shared/model/json_util.h"
#include "shared/pack/expert_table.h"

namespace flotilla::pack {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const std::string kConfigPath =
    std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A/config.json";

// One F32 field "x" of one float in a region of `size` bytes.
RegionLayout Layout(uint64_t size) {
  RegionLayout layout;
  layout.size = size;
  layout.fields.push_back({"x", model::DType::kF32, {1}, 0, 4});
  return layout;
}

// A complete manifest shaped like a pack of ckpt_A (13 layers, 8 experts,
// layer 0 dense).
PackManifest Sample() {
  PackManifest m;
  m.source_fingerprint = "0123456789abcdef";
  m.source_stamp = "00112233445566ff";
  m.source_shards = {"model.safetensors"};
  m.config_json = *model::internal::ReadSmallFile(kConfigPath);
  m.complete = true;
  uint64_t offset = 0;
  auto add = [&](const std::string& kind, int layer, uint64_t size) {
    PackRegion r;
    r.kind = kind;
    r.layer = layer;
    r.offset = offset;
    r.size = size;
    r.checksum = 0xfedcba9876543210ull + offset;
    r.layout = Layout(size);
    offset += size;
    m.regions.push_back(r);
  };
  for (int l = 0; l < 13; ++l) add("layer", l, 8192 + 4096 * (l % 3));
  add("embed", -1, 65536);
  add("lm_head", -1, 65536);
  add("globals", -1, 4096);
  m.expert_files = {"model.safetensors"};
  for (int l = 1; l < 13; ++l) {
    for (int e = 0; e < 8; ++e) {
      PackExpert x;
      x.layer = l;
      x.expert = e;
      x.offset = 1000 + (l * 8 + e) * 6528;
      x.length = 6528;
      x.checksum = ~static_cast<uint64_t>(l * 100 + e);
      x.tensor_offsets = {0, 2048, 2176, 4224, 4352, 6400};
      m.experts.push_back(x);
    }
  }
  return m;
}

absl::StatusOr<PackManifest> Decode(const EncodedPackManifest& f) {
  return DecodePackManifest(f.json, f.expert_table, "test");
}

TEST(PackManifest, RoundTripsExactly) {
  const PackManifest m = Sample();
  const EncodedPackManifest files = EncodePackManifest(m);
  EXPECT_EQ(files.expert_table.size(),
            kExpertTableHeaderBytes + 96 * kExpertRecordBytes);
  absl::StatusOr<PackManifest> back = Decode(files);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source_fingerprint, m.source_fingerprint);
  EXPECT_EQ(back->source_stamp, m.source_stamp);
  EXPECT_EQ(back->source_shards, m.source_shards);
  EXPECT_EQ(back->config_json, m.config_json);
  EXPECT_EQ(back->trunk_file, "trunk.bin");
  EXPECT_EQ(back->expert_format, "mxfp4");
  EXPECT_TRUE(back->experts_in_model_dir);
  EXPECT_TRUE(back->complete);
  ASSERT_EQ(back->regions.size(), m.regions.size());
  for (size_t i = 0; i < m.regions.size(); ++i) {
    EXPECT_EQ(back->regions[i].kind, m.regions[i].kind);
    EXPECT_EQ(back->regions[i].layer, m.regions[i].layer);
    EXPECT_EQ(back->regions[i].offset, m.regions[i].offset);
    EXPECT_EQ(back->regions[i].size, m.regions[i].size);
    EXPECT_EQ(back->regions[i].checksum, m.regions[i].checksum);
    EXPECT_EQ(LayoutToJson(back->regions[i].layout),
              LayoutToJson(m.regions[i].layout));
  }
  ASSERT_EQ(back->experts.size(), m.experts.size());
  for (size_t i = 0; i < m.experts.size(); ++i) {
    EXPECT_EQ(back->experts[i].layer, m.experts[i].layer);
    EXPECT_EQ(back->experts[i].expert, m.experts[i].expert);
    EXPECT_EQ(back->experts[i].file, m.experts[i].file);
    EXPECT_EQ(back->experts[i].offset, m.experts[i].offset);
    EXPECT_EQ(back->experts[i].length, m.experts[i].length);
    EXPECT_EQ(back->experts[i].checksum, m.experts[i].checksum);
    EXPECT_EQ(back->experts[i].tensor_offsets, m.experts[i].tensor_offsets);
  }
  // Serialising again gives the same bytes (pack relies on it for resume).
  const EncodedPackManifest again = EncodePackManifest(*back);
  EXPECT_EQ(again.json, files.json);
  EXPECT_EQ(again.expert_table, files.expert_table);
}

TEST(PackManifest, FindsRegionsAndExperts) {
  const PackManifest m = Sample();
  ASSERT_NE(m.FindLayer(5), nullptr);
  EXPECT_EQ(m.FindLayer(5)->layer, 5);
  EXPECT_EQ(m.FindLayer(13), nullptr);
  ASSERT_NE(m.FindRegion("lm_head"), nullptr);
  EXPECT_EQ(m.FindRegion("lm_head")->kind, "lm_head");
  EXPECT_EQ(m.FindRegion("nope"), nullptr);
  for (int l = 1; l < 13; ++l) {
    for (int e = 0; e < 8; ++e) {
      const PackExpert* x = m.FindExpert(l, e);
      ASSERT_NE(x, nullptr);
      EXPECT_EQ(x->layer, l);
      EXPECT_EQ(x->expert, e);
    }
  }
  EXPECT_EQ(m.FindExpert(0, 0), nullptr);
  EXPECT_EQ(m.FindExpert(1, 8), nullptr);
  EXPECT_EQ(m.FindExpert(13, 0), nullptr);
}

// A fault in one of the two files; `file` is the one the error must name.
struct BadCase {
  const char* name;
  std::function<void(json&, std::vector<PackExpert>&)> mutate;
  const char* message;
  const char* file = "test/manifest.json";
};

constexpr char kTable[] = "test/expert_table.bin";

TEST(PackManifest, RejectsMalformed) {
  const PackManifest sample = Sample();
  const json good = json::parse(EncodePackManifest(sample).json);
  using E = std::vector<PackExpert>;
  const BadCase cases[] = {
      {"missing field", [](json& j, E&) { j.erase("regions"); }, "regions"},
      {"unknown field", [](json& j, E&) { j["extra"] = 1; }, "unknown field"},
      {"version", [](json& j, E&) { j["version"] = 1; }, "version 1"},
      {"version type", [](json& j, E&) { j["version"] = "1"; }, "version"},
      {"complete type", [](json& j, E&) { j["complete"] = 1; }, "boolean"},
      {"fingerprint", [](json& j, E&) { j["source_fingerprint"] = "xyz"; },
       "source_fingerprint"},
      {"stamp", [](json& j, E&) { j["source_stamp"] = ""; }, "source_stamp"},
      {"shard escapes", [](json& j, E&) { j["source_shards"][0] = "../x"; },
       "source_shards[0]"},
      {"trunk escapes", [](json& j, E&) { j["trunk_file"] = "../t.bin"; },
       "trunk_file"},
      {"format", [](json& j, E&) { j["expert_format"] = "fp8"; }, "fp8"},
      {"expert file", [](json& j, E&) { j["expert_files"][0] = "/abs"; },
       "expert_files[0]"},
      {"bad config", [](json& j, E&) { j["config_json"] = "{}"; },
       "config_json"},
      {"region offset type",
       [](json& j, E&) { j["regions"][2]["offset"] = "0"; },
       "regions[2].offset"},
      {"negative offset",
       [](json& j, E&) { j["regions"][2]["offset"] = -4096; },
       "regions[2].offset"},
      {"unaligned offset",
       [](json& j, E&) { j["regions"][2]["offset"] = 4097; },
       "multiples of 4096"},
      {"zero size", [](json& j, E&) { j["regions"][0]["size"] = 0; },
       "regions[0]"},
      {"layout size",
       [](json& j, E&) { j["regions"][1]["layout"]["size"] = 4096; },
       "regions[1].layout"},
      {"layout type", [](json& j, E&) { j["regions"][1]["layout"] = "{}"; },
       "regions[1].layout"},
      {"kind", [](json& j, E&) { j["regions"][0]["kind"] = "vision"; },
       "vision"},
      {"layer of embed", [](json& j, E&) { j["regions"][13]["layer"] = 0; },
       "regions[13].layer"},
      {"layer past config", [](json& j, E&) { j["regions"][12]["layer"] = 13; },
       "layer 13"},
      {"duplicate layer", [](json& j, E&) { j["regions"][1]["layer"] = 0; },
       "duplicate region"},
      {"overlap", [](json& j, E&) { j["regions"][1]["offset"] = 4096; },
       "overlap"},
      {"incomplete set", [](json& j, E&) { j["regions"].erase(15); },
       "complete pack"},
      {"checksum", [](json& j, E&) { j["regions"][0]["checksum"] = "12"; },
       "regions[0].checksum"},
      {"checksum case",
       [](json& j, E&) { j["regions"][0]["checksum"] = "FEDCBA9876543210"; },
       "hex"},
      {"table checksum", [](json& j, E&) { j["expert_table_checksum"] = "12"; },
       "expert_table_checksum"},
      {"expert count", [](json& j, E&) { j["expert_count"] = 95; },
       "records 95", kTable},
      {"expert unsorted", [](json&, E& e) { std::swap(e[0], e[1]); }, "sorted",
       kTable},
      {"expert duplicate", [](json&, E& e) { e[1].expert = 0; }, "sorted",
       kTable},
      {"expert file index", [](json&, E& e) { e[3].file = 1; }, "file index 1",
       kTable},
      {"expert dense layer", [](json&, E& e) { e[0].layer = 0; },
       "not an MoE layer", kTable},
      {"expert index", [](json&, E& e) { e[7].expert = 8; }, "expert 8",
       kTable},
      {"expert negative", [](json&, E& e) { e[7].expert = -1; }, "out of range",
       kTable},
      {"expert zero length", [](json&, E& e) { e[0].length = 0; }, "length",
       kTable},
      {"tensor offset", [](json&, E& e) { e[0].tensor_offsets[5] = 6528; },
       "outside the run", kTable},
      {"expert overlap",
       [](json&, E& e) { e[1].offset = 1000 + 8 * 6528 + 10; }, "overlap",
       kTable},
      {"packed unaligned",
       [](json& j, E&) { j["experts_in_model_dir"] = false; }, "4096-aligned",
       kTable},
  };
  for (const BadCase& c : cases) {
    // The table is re-encoded and its checksum recorded, so each case
    // reaches the check it is about.
    json j = good;
    std::vector<PackExpert> experts = sample.experts;
    c.mutate(j, experts);
    PackManifest table_only;
    table_only.experts = experts;
    EncodedPackManifest f;
    f.expert_table = EncodePackManifest(table_only).expert_table;
    if (j["expert_table_checksum"] == good["expert_table_checksum"]) {
      j["expert_table_checksum"] = io::ChecksumHex(
          io::Checksum64(f.expert_table.data(), f.expert_table.size()));
    }
    f.json = j.dump();
    absl::StatusOr<PackManifest> m = Decode(f);
    EXPECT_FALSE(m.ok()) << c.name;
    if (!m.ok()) {
      EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.message))
          << c.name;
      EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.file))
          << c.name;
    }
  }
  EXPECT_FALSE(DecodePackManifest("{not json", "", "x").ok());
  EXPECT_FALSE(DecodePackManifest("[]", "", "x").ok());
  EXPECT_FALSE(DecodePackManifest("", "", "x").ok());
}

// Faults in expert_table.bin's bytes: each is refused naming the file,
// with the manifest's checksum made to match so the decoder itself is
// what catches it (and once without, for a table from another pack).
TEST(PackManifest, RejectsDamagedExpertTables) {
  const EncodedPackManifest good = EncodePackManifest(Sample());
  struct TableCase {
    const char* name;
    std::function<void(std::string&)> mutate;
    const char* message;
  };
  const TableCase cases[] = {
      {"empty", [](std::string& t) { t.clear(); }, "not an expert table"},
      {"magic", [](std::string& t) { t[0] = 'X'; }, "not an expert table"},
      {"record size", [](std::string& t) { t[8] = 80; }, "records of 80"},
      {"truncated", [](std::string& t) { t.resize(t.size() - 10); },
       "header says 96 records"},
      {"trailing", [](std::string& t) { t += std::string(88, '\0'); },
       "header says 96 records"},
      {"layer high bit",
       [](std::string& t) { t[kExpertTableHeaderBytes + 3] = '\x80'; },
       "out of range"},
  };
  for (const TableCase& c : cases) {
    EncodedPackManifest f = good;
    c.mutate(f.expert_table);
    json j = json::parse(f.json);
    j["expert_table_checksum"] = io::ChecksumHex(
        io::Checksum64(f.expert_table.data(), f.expert_table.size()));
    f.json = j.dump();
    absl::StatusOr<PackManifest> m = Decode(f);
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.message))
        << c.name;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(kTable)) << c.name;
  }
  EncodedPackManifest swapped = good;
  swapped.expert_table[kExpertTableHeaderBytes + 40] ^= 1;
  absl::StatusOr<PackManifest> m = Decode(swapped);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("XXH3-64"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(kTable));
}

// Tables written before the mxfp4_bias format held six tensor offsets per
// record (88 bytes); they still decode, to the same experts.
TEST(PackManifest, ReadsSixOffsetExpertTables) {
  const PackManifest m = Sample();
  const std::string table = EncodeExpertTable(m.experts);
  std::string old = table.substr(0, kExpertTableHeaderBytes);
  old[8] = static_cast<char>(kSixOffsetRecordBytes);
  for (size_t i = 0; i < m.experts.size(); ++i) {
    old += table.substr(kExpertTableHeaderBytes + i * kExpertRecordBytes,
                        kSixOffsetRecordBytes);
  }
  absl::StatusOr<std::vector<PackExpert>> back =
      DecodeExpertTable(old, "old.bin");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), m.experts.size());
  for (size_t i = 0; i < back->size(); ++i) {
    EXPECT_EQ((*back)[i].offset, m.experts[i].offset);
    EXPECT_EQ((*back)[i].tensor_offsets, m.experts[i].tensor_offsets);
  }
}

TEST(PackManifest, LoadRefusesIncompletePacks) {
  const std::string dir = ::testing::TempDir() + "/pack_manifest_test_" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  PackManifest m = Sample();
  auto write = [&](const PackManifest& pm) {
    const EncodedPackManifest files = EncodePackManifest(pm);
    for (const auto& [name, bytes] :
         {std::pair{"/manifest.json", &files.json},
          std::pair{"/expert_table.bin", &files.expert_table}}) {
      FILE* f = std::fopen((dir + name).c_str(), "wb");
      ASSERT_NE(f, nullptr);
      std::fwrite(bytes->data(), 1, bytes->size(), f);
      std::fclose(f);
    }
  };
  write(m);
  absl::StatusOr<PackManifest> loaded = LoadPackManifest(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->regions.size(), 16u);
  EXPECT_EQ(loaded->experts.size(), 96u);
  m.complete = false;
  write(m);
  EXPECT_TRUE(ReadPackManifest(dir).ok());
  loaded = LoadPackManifest(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("unfinished"));
  // A manifest without its table, and one of the previous format version.
  m.complete = true;
  write(m);
  std::filesystem::remove(dir + "/expert_table.bin");
  loaded = LoadPackManifest(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("expert_table.bin"));
  {
    json old = json::parse(EncodePackManifest(m).json);
    old["version"] = 1;
    old["experts"] = json::array();
    FILE* f = std::fopen((dir + "/manifest.json").c_str(), "wb");
    const std::string text = old.dump();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  loaded = LoadPackManifest(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("re-run flotilla-tool pack"));
  std::filesystem::remove_all(dir);
  loaded = LoadPackManifest(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("manifest.json"));
}

}  // namespace
}  // namespace flotilla::pack
