#include "shared/pack/pack_manifest.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/model/json_util.h"

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

absl::StatusOr<PackManifest> Reparse(const json& j) {
  return PackManifestFromJson(j.dump(), "test/manifest.json");
}

TEST(PackManifest, RoundTripsExactly) {
  const PackManifest m = Sample();
  const std::string text = PackManifestToJson(m);
  absl::StatusOr<PackManifest> back = PackManifestFromJson(text, "t");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source_fingerprint, m.source_fingerprint);
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
    EXPECT_EQ(back->experts[i].offset, m.experts[i].offset);
    EXPECT_EQ(back->experts[i].checksum, m.experts[i].checksum);
    EXPECT_EQ(back->experts[i].tensor_offsets, m.experts[i].tensor_offsets);
  }
  // Serialising again gives the same bytes (pack relies on it for resume).
  EXPECT_EQ(PackManifestToJson(*back), text);
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

struct BadCase {
  const char* name;
  std::function<void(json&)> mutate;
  const char* message;
};

TEST(PackManifest, RejectsMalformed) {
  const json good = json::parse(PackManifestToJson(Sample()));
  const BadCase cases[] = {
      {"missing field", [](json& j) { j.erase("regions"); }, "regions"},
      {"unknown field", [](json& j) { j["extra"] = 1; }, "unknown field"},
      {"version", [](json& j) { j["version"] = 2; }, "version 2"},
      {"version type", [](json& j) { j["version"] = "1"; }, "version"},
      {"complete type", [](json& j) { j["complete"] = 1; }, "boolean"},
      {"fingerprint", [](json& j) { j["source_fingerprint"] = "xyz"; },
       "source_fingerprint"},
      {"trunk escapes", [](json& j) { j["trunk_file"] = "../t.bin"; },
       "trunk_file"},
      {"format", [](json& j) { j["expert_format"] = "fp8"; }, "fp8"},
      {"expert file", [](json& j) { j["expert_files"][0] = "/abs"; },
       "expert_files[0]"},
      {"bad config", [](json& j) { j["config_json"] = "{}"; }, "config_json"},
      {"region offset type", [](json& j) { j["regions"][2]["offset"] = "0"; },
       "regions[2].offset"},
      {"negative offset", [](json& j) { j["regions"][2]["offset"] = -4096; },
       "regions[2].offset"},
      {"unaligned offset", [](json& j) { j["regions"][2]["offset"] = 4097; },
       "multiples of 4096"},
      {"zero size", [](json& j) { j["regions"][0]["size"] = 0; }, "regions[0]"},
      {"layout size", [](json& j) { j["regions"][1]["layout"]["size"] = 4096; },
       "regions[1].layout"},
      {"layout type", [](json& j) { j["regions"][1]["layout"] = "{}"; },
       "regions[1].layout"},
      {"kind", [](json& j) { j["regions"][0]["kind"] = "vision"; }, "vision"},
      {"layer of embed", [](json& j) { j["regions"][13]["layer"] = 0; },
       "regions[13].layer"},
      {"layer past config", [](json& j) { j["regions"][12]["layer"] = 13; },
       "layer 13"},
      {"duplicate layer", [](json& j) { j["regions"][1]["layer"] = 0; },
       "duplicate region"},
      {"overlap", [](json& j) { j["regions"][1]["offset"] = 4096; }, "overlap"},
      {"incomplete set", [](json& j) { j["regions"].erase(15); },
       "complete pack"},
      {"checksum", [](json& j) { j["regions"][0]["checksum"] = "12"; },
       "regions[0].checksum"},
      {"checksum case",
       [](json& j) { j["regions"][0]["checksum"] = "FEDCBA9876543210"; },
       "hex"},
      {"expert unsorted",
       [](json& j) { std::swap(j["experts"][0], j["experts"][1]); }, "sorted"},
      {"expert duplicate", [](json& j) { j["experts"][1]["expert"] = 0; },
       "sorted"},
      {"expert file index", [](json& j) { j["experts"][3]["file"] = 1; },
       "file index 1"},
      {"expert dense layer", [](json& j) { j["experts"][0]["layer"] = 0; },
       "not an MoE layer"},
      {"expert index", [](json& j) { j["experts"][7]["expert"] = 8; },
       "expert 8"},
      {"expert zero length", [](json& j) { j["experts"][0]["length"] = 0; },
       "length"},
      {"tensor offset",
       [](json& j) { j["experts"][0]["tensor_offsets"][5] = 6528; },
       "outside the run"},
      {"tensor offsets count",
       [](json& j) { j["experts"][0]["tensor_offsets"].erase(5); },
       "6 integers"},
      {"expert overlap",
       [](json& j) { j["experts"][1]["offset"] = 1000 + 8 * 6528 + 10; },
       "overlap"},
      {"packed unaligned", [](json& j) { j["experts_in_model_dir"] = false; },
       "4096-aligned"},
      {"expert int type", [](json& j) { j["experts"][0]["layer"] = 1.5; },
       "experts[0].layer"},
  };
  for (const BadCase& c : cases) {
    json j = good;
    c.mutate(j);
    absl::StatusOr<PackManifest> m = Reparse(j);
    EXPECT_FALSE(m.ok()) << c.name;
    if (!m.ok()) {
      EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.message))
          << c.name;
      EXPECT_THAT(std::string(m.status().message()),
                  HasSubstr("test/manifest.json"))
          << c.name;
    }
  }
  EXPECT_FALSE(PackManifestFromJson("{not json", "x").ok());
  EXPECT_FALSE(PackManifestFromJson("[]", "x").ok());
  EXPECT_FALSE(PackManifestFromJson("", "x").ok());
}

TEST(PackManifest, LoadRefusesIncompletePacks) {
  const std::string dir = ::testing::TempDir() + "/pack_manifest_test_" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  PackManifest m = Sample();
  auto write = [&](const PackManifest& pm) {
    FILE* f = std::fopen((dir + "/manifest.json").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string text = PackManifestToJson(pm);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  };
  write(m);
  absl::StatusOr<PackManifest> loaded = LoadPackManifest(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->regions.size(), 16u);
  m.complete = false;
  write(m);
  loaded = LoadPackManifest(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("unfinished"));
  std::filesystem::remove_all(dir);
  loaded = LoadPackManifest(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("manifest.json"));
}

}  // namespace
}  // namespace flotilla::pack
