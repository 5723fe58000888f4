#include "shared/tokenizer/byte_pair.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/tokenizer/testdata_util.h"
#include "shared/tokenizer/tiktoken_file.h"

namespace flotilla::tokenizer {
namespace {

using ::testing::ElementsAre;

// All 256 single bytes at ranks 0..255, then the given merges in order.
RankMap ByteRanksPlus(const std::vector<std::string>& merges) {
  RankMap ranks;
  for (int b = 0; b < 256; ++b) ranks[std::string(1, static_cast<char>(b))] = b;
  int32_t next = 256;
  for (const std::string& m : merges) ranks[m] = next++;
  return ranks;
}

std::vector<int32_t> Encode(absl::string_view piece, const RankMap& ranks) {
  std::vector<int32_t> out;
  BytePairEncode(piece, ranks, &out);
  return out;
}

std::vector<int32_t> Quadratic(absl::string_view piece, const RankMap& r) {
  std::vector<int32_t> out;
  internal::BytePairMergeQuadratic(piece, r, &out);
  return out;
}

std::vector<int32_t> Heap(absl::string_view piece, const RankMap& r) {
  std::vector<int32_t> out;
  internal::BytePairMergeHeap(piece, r, &out);
  return out;
}

TEST(BytePairTest, EmptyPieceEmitsNothing) {
  EXPECT_TRUE(Encode("", ByteRanksPlus({})).empty());
}

TEST(BytePairTest, SingleBytes) {
  const RankMap ranks = ByteRanksPlus({});
  EXPECT_THAT(Encode("ab", ranks), ElementsAre('a', 'b'));
  EXPECT_THAT(Encode(std::string("\0\xff", 2), ranks), ElementsAre(0, 255));
}

TEST(BytePairTest, LowestRankMergesFirst) {
  // "bc" (256) outranks "ab" (257), so "abc" -> a + bc, and "abcd" can then
  // use "bcd" but never "ab".
  const RankMap ranks = ByteRanksPlus({"bc", "ab", "bcd"});
  EXPECT_THAT(Encode("abc", ranks), ElementsAre('a', 256));
  EXPECT_THAT(Encode("abcd", ranks), ElementsAre('a', 258));
  EXPECT_THAT(Encode("abx", ranks), ElementsAre(257, 'x'));
}

TEST(BytePairTest, TiesMergeLeftmostFirst) {
  const RankMap ranks = ByteRanksPlus({"aa"});
  EXPECT_THAT(Encode("aaa", ranks), ElementsAre(256, 'a'));
  EXPECT_THAT(Encode("aaaaa", ranks), ElementsAre(256, 256, 'a'));
}

TEST(BytePairTest, WholePieceTokenWinsEvenIfMergesCannotReachIt) {
  // No pair of "xyz" has a rank, so merging alone would give x, y, z.
  const RankMap ranks = ByteRanksPlus({"xyz"});
  EXPECT_THAT(Encode("xyz", ranks), ElementsAre(256));
  EXPECT_THAT(Quadratic("xyz", ranks), ElementsAre('x', 'y', 'z'));
}

TEST(BytePairTest, MergesOnlyWhenConcatenationIsAToken) {
  // "ab"+"cd" is a merge candidate only because "abcd" is itself ranked.
  const RankMap ranks = ByteRanksPlus({"ab", "cd", "abcd"});
  EXPECT_THAT(Encode("abcde", ranks), ElementsAre(258, 'e'));
  const RankMap no_abcd = ByteRanksPlus({"ab", "cd"});
  EXPECT_THAT(Encode("abcde", no_abcd), ElementsAre(256, 257, 'e'));
}

// The heap strategy must reproduce tiktoken's quadratic scan exactly, on
// real ranks and on inputs rich in repeated bytes (many rank ties).
TEST(BytePairTest, HeapMatchesQuadraticOnCl100k) {
  absl::StatusOr<std::string> text =
      ReadFileToString(testing::TestdataPath("cl100k_base.tiktoken"));
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::vector<RankEntry>> entries =
      ParseTiktokenModel(*text, "cl100k_base.tiktoken");
  ASSERT_TRUE(entries.ok()) << entries.status();
  RankMap ranks;
  for (const RankEntry& e : *entries) ranks[e.bytes] = e.rank;

  std::mt19937 rng(7);
  const std::string alphabets[] = {"abcdefghijklmnopqrstuvwxyz",
                                   "aaab",
                                   "     \n\t",
                                   "0123456789",
                                   "etaoin shrdlu",
                                   "\xe4\xb8\xad\xe6\x96\x87\xe3\x81\x82"};
  int compared = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const size_t len = 2 + rng() % (iter < 1000 ? 64 : 700);
    std::string piece;
    const std::string& alphabet = alphabets[rng() % std::size(alphabets)];
    const bool random_bytes = rng() % 4 == 0;
    for (size_t i = 0; i < len; ++i) {
      piece.push_back(random_bytes ? static_cast<char>(rng() % 256)
                                   : alphabet[rng() % alphabet.size()]);
    }
    ASSERT_EQ(Quadratic(piece, ranks), Heap(piece, ranks))
        << testing::Quote(piece);
    ++compared;
  }
  EXPECT_EQ(compared, 1500);
}

TEST(BytePairTest, LongPieceIsFast) {
  // 1 MB without a single split point must not take quadratic time.
  std::string piece;
  std::mt19937 rng(1);
  for (int i = 0; i < (1 << 20); ++i) piece.push_back('a' + rng() % 26);
  const RankMap ranks = ByteRanksPlus({"ab", "abc", "xy", "qq"});
  const std::vector<int32_t> ids = Encode(piece, ranks);
  std::string decoded;
  std::vector<std::string> by_id(ranks.size());
  for (const auto& [bytes, id] : ranks) by_id[id] = bytes;
  for (int32_t id : ids) decoded += by_id[id];
  EXPECT_EQ(decoded, piece);
}

}  // namespace
}  // namespace flotilla::tokenizer
