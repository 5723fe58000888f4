#include "shared/io/memory_budget.h"

#include <sys/mman.h>

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::io {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;

TEST(ParseByteSizeTest, AcceptsUnitsAndFractions) {
  EXPECT_EQ(*ParseByteSize("8G"), 8 * kGiB);
  EXPECT_EQ(*ParseByteSize("512M"), 512 * kMiB);
  EXPECT_EQ(*ParseByteSize("1.5G"), 3 * kGiB / 2);
  EXPECT_EQ(*ParseByteSize("123456"), 123456u);
  EXPECT_EQ(*ParseByteSize("64k"), 64 * kKiB);
  EXPECT_EQ(*ParseByteSize("64KiB"), 64 * kKiB);
  EXPECT_EQ(*ParseByteSize("2tb"), 2 * kGiB * 1024);
  EXPECT_EQ(*ParseByteSize(" 16 g "), 16 * kGiB);  // Spaces around the unit.
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize(".5K"), 512u);
  EXPECT_EQ(*ParseByteSize("1.25M"), 1310720u);
}

TEST(ParseByteSizeTest, ErrorsQuoteTheText) {
  for (const char* bad :
       {"", "G", "8X", "8GG", "1.5", "-1G", "1..5G", "1.G", "8 GiBs", "abc"}) {
    auto r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("\"") + bad))
        << bad;
  }
  auto big = ParseByteSize("99999999999T");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ParseByteSize("99999999999999999999").status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(ResolveBudgetTest, PresetsSizesAndMachineRelative) {
  EXPECT_EQ(*ResolveBudget("laptop"), 8 * kGiB);
  EXPECT_EQ(*ResolveBudget("Desktop"), 32 * kGiB);
  EXPECT_EQ(*ResolveBudget("workstation"), 96 * kGiB);
  EXPECT_EQ(*ResolveBudget("server"), 128 * kGiB);
  EXPECT_EQ(*ResolveBudget("12G"), 12 * kGiB);
  auto max = ResolveBudget("max");
  auto avail = ResolveBudget("auto");
  ASSERT_TRUE(max.ok()) << max.status();
  ASSERT_TRUE(avail.ok()) << avail.status();
  EXPECT_GT(*max, 256 * kMiB);
  EXPECT_GT(*avail, 0u);
  EXPECT_LT(*avail, *max);  // At least the 10% margin below.
  auto bad = ResolveBudget("huge");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("\"huge\""));
}

TEST(MemoryAccountantTest, ChargeReleaseAndPeak) {
  MemoryAccountant acct(100 * kMiB);
  ASSERT_TRUE(acct.Charge("trunk.ring", 60 * kMiB).ok());
  ASSERT_TRUE(acct.Charge("experts", 30 * kMiB).ok());
  ASSERT_TRUE(acct.Charge("experts", 10 * kMiB).ok());  // Exactly full.
  EXPECT_EQ(acct.used(), 100 * kMiB);
  EXPECT_EQ(acct.available(), 0u);
  EXPECT_EQ(acct.owner_bytes("experts"), 40 * kMiB);
  acct.Release("experts", 40 * kMiB);
  EXPECT_EQ(acct.owner_bytes("experts"), 0u);
  EXPECT_EQ(acct.owners().size(), 1u);
  EXPECT_EQ(acct.used(), 60 * kMiB);
  EXPECT_EQ(acct.peak(), 100 * kMiB);
  EXPECT_EQ(acct.budget(), 100 * kMiB);
}

TEST(MemoryAccountantTest, OverflowNamesOwnerRequestUsedAndBudget) {
  MemoryAccountant acct(100 * kMiB);
  ASSERT_TRUE(acct.Charge("trunk.ring", 60 * kMiB).ok());
  absl::Status s = acct.Charge("expert.cache", 50 * kMiB);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("expert.cache"));
  EXPECT_THAT(s.message(), HasSubstr("50.00 MiB"));
  EXPECT_THAT(s.message(), HasSubstr("60.00 MiB"));
  EXPECT_THAT(s.message(), HasSubstr("100.00 MiB"));
  EXPECT_EQ(acct.used(), 60 * kMiB) << "a refused charge charges nothing";
  EXPECT_FALSE(acct.Charge("x", ~0ull).ok());  // No wrap-around.
}

TEST(MemoryAccountantTest, ReportListsOwnersInMiB) {
  MemoryAccountant acct(1 * kGiB);
  ASSERT_TRUE(acct.Charge("trunk.pinned", 256 * kMiB).ok());
  ASSERT_TRUE(acct.Charge("kv", 3 * kMiB / 2).ok());
  const std::string r = acct.Report();
  EXPECT_THAT(r, HasSubstr("trunk.pinned"));
  EXPECT_THAT(r, HasSubstr("256.0"));
  EXPECT_THAT(r, HasSubstr("25.0%"));
  EXPECT_THAT(r, HasSubstr("1.5"));
  EXPECT_THAT(r, HasSubstr("1024.0"));
}

TEST(MemoryAccountantTest, ConcurrentChargesNeverExceedBudget) {
  MemoryAccountant acct(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&acct, t] {
      const std::string owner = absl::StrCat("t", t);
      for (int i = 0; i < 20000; ++i) {
        if (acct.Charge(owner, 7).ok()) acct.Release(owner, 7);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acct.used(), 0u);
  EXPECT_LE(acct.peak(), 1000u);
}

TEST(RssTest, PlausibleAndTracksTouchedMemory) {
  const uint64_t before = CurrentRssBytes();
  EXPECT_GT(before, 1 * kMiB);
  EXPECT_LT(before, 64 * kGiB);
  constexpr size_t kBytes = 64 * kMiB;
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_GE(CurrentRssBytes(), before + kBytes / 2);
  EXPECT_GE(PeakRssBytes(), before + kBytes / 2);
  munmap(p, kBytes);
  EXPECT_GE(PeakRssBytes(), CurrentRssBytes());
}

TEST(FormatBytesTest, DecimalAndBinary) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(812), "812 B");
  EXPECT_EQ(FormatBytes(1270000000), "1.27 GB");
  EXPECT_EQ(FormatBytes(1250000), "1.25 MB");
  EXPECT_EQ(FormatBytes(1560000000000ull), "1.56 TB");
  EXPECT_EQ(FormatBytesBinary(512 * kMiB), "512.00 MiB");
  EXPECT_EQ(FormatBytesBinary(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(FormatBytesBinary(1023), "1023 B");
}

}  // namespace
}  // namespace flotilla::io
