#include "shared/placement/expert_split.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/placement/placement.h"

namespace flotilla::placement {
namespace {

using ::testing::HasSubstr;

TEST(SliceRows, SlicesTileTheRowsInOrderAndDifferByAtMostOne) {
  const std::vector<std::pair<uint64_t, int>> cases = {
      {1, 1},    {7, 1},    {2, 2},       {64, 2},
      {64, 3},   {7, 7},    {8, 3},       {10, 4},
      {96, 5},   {100, 7},  {2048, 6},    {3, 2},
      {1000, 9}, {513, 64}, {4096, 4096}, {uint64_t{1} << 40, 3}};
  for (const auto& [size, n] : cases) {
    SCOPED_TRACE(std::to_string(size) + " rows over " + std::to_string(n));
    uint64_t next = 0, smallest = size, largest = 0;
    for (int k = 0; k < n; ++k) {
      const RowRange r = SliceRows(size, k, n);
      EXPECT_EQ(r.begin, next) << "slice " << k;
      ASSERT_GE(r.end, r.begin);
      smallest = std::min(smallest, r.size());
      largest = std::max(largest, r.size());
      next = r.end;
    }
    EXPECT_EQ(next, size);
    EXPECT_LE(largest - smallest, 1u);
    if (size >= static_cast<uint64_t>(n)) {
      EXPECT_GE(smallest, 1u);
    }
  }
}

TEST(SliceRows, MatchesTheFloorFormula) {
  EXPECT_EQ(SliceRows(64, 0, 3), (RowRange{0, 21}));
  EXPECT_EQ(SliceRows(64, 1, 3), (RowRange{21, 42}));
  EXPECT_EQ(SliceRows(64, 2, 3), (RowRange{42, 64}));
  EXPECT_EQ(SliceRows(5, 0, 1), (RowRange{0, 5}));
}

ExpertSplit Sample() {
  ExpertSplit s;
  s.workers = 3;
  s.worker = 2;
  s.intermediate = 96;
  s.latent = 64;
  s.source_fingerprint = "0123456789abcdef";
  return s;
}

TEST(ExpertSplit, RowsOfTheWorker) {
  const ExpertSplit s = Sample();
  EXPECT_EQ(s.inter_rows(), (RowRange{64, 96}));
  EXPECT_EQ(s.latent_rows(), (RowRange{42, 64}));
}

TEST(ExpertSplit, JsonRoundTripsWithAStableForm) {
  const ExpertSplit s = Sample();
  ASSERT_TRUE(s.Validate().ok());
  const std::string text = s.ToJson();
  EXPECT_EQ(text,
            "{\"format\":\"flotilla-split\",\"version\":1,\"workers\":3,"
            "\"worker\":2,\"intermediate\":96,\"latent\":64,"
            "\"source_fingerprint\":\"0123456789abcdef\"}\n");
  absl::StatusOr<ExpertSplit> back = ExpertSplit::FromJson(text, "split.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->workers, 3);
  EXPECT_EQ(back->worker, 2);
  EXPECT_EQ(back->intermediate, 96u);
  EXPECT_EQ(back->latent, 64u);
  EXPECT_EQ(back->source_fingerprint, "0123456789abcdef");
  EXPECT_EQ(back->ToJson(), text);
}

TEST(ExpertSplit, ValidateRefusesBadShapes) {
  ExpertSplit s = Sample();
  s.workers = 0;
  EXPECT_EQ(s.Validate().code(), absl::StatusCode::kInvalidArgument);
  s = Sample();
  s.workers = kMaxWorkers + 1;
  s.intermediate = s.latent = 1 << 20;
  EXPECT_FALSE(s.Validate().ok());
  s = Sample();
  s.worker = 3;
  EXPECT_FALSE(s.Validate().ok());
  s = Sample();
  s.worker = -1;
  EXPECT_FALSE(s.Validate().ok());
  s = Sample();
  s.intermediate = 2;
  EXPECT_THAT(std::string(s.Validate().message()), HasSubstr("intermediate"));
  s = Sample();
  s.latent = 2;
  EXPECT_THAT(std::string(s.Validate().message()), HasSubstr("latent"));
  s = Sample();
  s.intermediate = s.latent = 3;  // one row each is enough
  EXPECT_TRUE(s.Validate().ok());
}

// Sample()'s JSON with `key` replaced by `value` (raw JSON), or removed
// when `value` is empty.
std::string With(const std::string& key, const std::string& value) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(Sample().ToJson());
  if (value.empty()) {
    j.erase(key);
  } else {
    j[key] = nlohmann::ordered_json::parse(value);
  }
  return j.dump();
}

TEST(ExpertSplit, FromJsonRefusalsNameTheSourceAndTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "invalid JSON"},
      {"[1, 2]", "not a split file"},
      {With("format", "\"flotilla-placement\""), "not a split file"},
      {With("format", "7"), "not a split file"},
      {With("format", ""), "not a split file"},
      {With("version", "2"), "split version 2"},
      {With("version", "\"1\""), "\"version\""},
      {With("workers", ""), "missing \"workers\""},
      {With("workers", "-2"), "\"workers\" must be a non-negative integer"},
      {With("workers", "2.5"), "\"workers\" must be a non-negative integer"},
      {With("workers", "\"3\""), "\"workers\" must be a non-negative integer"},
      {With("workers", "0"), "\"workers\" must be at least 1"},
      {With("workers", "5000"), "\"workers\" 5000 is above 4096"},
      {With("worker", ""), "missing \"worker\""},
      {With("worker", "-1"), "\"worker\" must be a non-negative integer"},
      {With("worker", "3"), "\"worker\" 3 is not below \"workers\" 3"},
      {With("intermediate", ""), "missing \"intermediate\""},
      {With("intermediate", "-96"), "\"intermediate\" must be a non-negative"},
      {With("intermediate", "null"), "\"intermediate\" must be a non-neg"},
      {With("intermediate", "2"), "\"intermediate\" 2 is below \"workers\" 3"},
      {With("latent", ""), "missing \"latent\""},
      {With("latent", "1.0"), "\"latent\" must be a non-negative integer"},
      {With("latent", "0"), "\"latent\" 0 is below \"workers\" 3"},
      {With("source_fingerprint", ""), "\"source_fingerprint\" must be"},
      {With("source_fingerprint", "12"), "\"source_fingerprint\" must be"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    absl::StatusOr<ExpertSplit> s = ExpertSplit::FromJson(text, "w/split.json");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("w/split.json"));
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(want));
  }
}

TEST(ExpertSplit, LoadReadsTheFileAndNamesAMissingOne) {
  const std::string dir =
      ::testing::TempDir() + "/flotilla_split_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + kSplitFile;
  {
    std::ofstream out(path, std::ios::trunc);
    out << Sample().ToJson();
  }
  absl::StatusOr<ExpertSplit> s = ExpertSplit::Load(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->worker, 2);

  {
    std::ofstream out(path, std::ios::trunc);
    out << With("worker", "9");
  }
  s = ExpertSplit::Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(path));

  std::filesystem::remove_all(dir);
  s = ExpertSplit::Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(path));
}

}  // namespace
}  // namespace flotilla::placement
