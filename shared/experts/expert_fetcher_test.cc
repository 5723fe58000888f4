#include "shared/experts/expert_fetcher.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/checksum.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/safetensors.h"
#include "shared/testing/experts_test_util.h"
#include "shared/testing/faulty_reader.h"

namespace flotilla::experts {
namespace {

using testing::CacheFixturePath;
using testing::CacheFixtureRun;
using ::testing::HasSubstr;

ExpertIndex CacheIndex(const std::string& path = CacheFixturePath()) {
  auto source = model::SafetensorsCheckpoint::OpenFile(path);
  EXPECT_TRUE(source.ok()) << source.status();
  auto index = ExpertIndex::FromTensorSource(**source, {});
  EXPECT_TRUE(index.ok()) << index.status();
  return std::move(index).value();
}

// Records the true checksum of each of the cache fixture's 24 runs.
absl::Status SetFixtureChecksums(ExpertIndex* index) {
  for (int e = 0; e < 24; ++e) {
    const std::vector<uint8_t> run = CacheFixtureRun(e);
    absl::Status s = index->SetChecksum(ExpertKey{0, e},
                                        io::Checksum64(run.data(), run.size()));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<ExpertKey> Layer0(std::vector<int> experts) {
  std::vector<ExpertKey> keys;
  for (int e : experts) keys.push_back(ExpertKey{0, e});
  return keys;
}

bool UringWorks() {
  static const bool works =
      io::CreateBatchReader(io::ReaderKind::kUring, 4).ok();
  return works;
}

// Fetches `keys`, checking every run against the fixture's formula and that
// each key arrives exactly once.
absl::Status FetchAndCheck(ExpertFetcher* f, const std::vector<ExpertKey>& keys,
                           const std::vector<ExpertKey>* lookahead = nullptr) {
  std::map<int, int> seen;
  absl::Status s = f->Fetch(
      keys,
      [&](const ExpertKey& key, const uint8_t* run) {
        const std::vector<uint8_t> want = CacheFixtureRun(key.expert);
        EXPECT_EQ(std::memcmp(run, want.data(), want.size()), 0)
            << "expert " << key.expert << " got another expert's bytes";
        ++seen[key.expert];
        return absl::OkStatus();
      },
      lookahead);
  if (s.ok()) {
    EXPECT_EQ(seen.size(), keys.size());
    for (const auto& [e, n] : seen) EXPECT_EQ(n, 1) << "expert " << e;
  }
  return s;
}

// slots, reader, cache slots, prefetch.
using Params = std::tuple<int, io::ReaderKind, int, bool>;
class FetcherMatrixTest : public ::testing::TestWithParam<Params> {};

TEST_P(FetcherMatrixTest, EveryRunExactWhateverTheConfiguration) {
  const auto [slots, reader, cache, prefetch] = GetParam();
  if (reader == io::ReaderKind::kUring && !UringWorks()) {
    GTEST_SKIP() << "io_uring not available here";
  }
  const ExpertIndex index = CacheIndex();
  FetcherOptions o;
  o.slots = slots;
  o.cache_slots = cache;
  o.reader = reader;
  o.queue_depth = 16;
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok()) << f.status();
  std::mt19937 rng(slots * 100 + cache);
  std::vector<int> all(24);
  for (int e = 0; e < 24; ++e) all[e] = e;
  for (int round = 0; round < 4; ++round) {
    std::shuffle(all.begin(), all.end(), rng);
    const int n = round == 0 ? 24 : 1 + rng() % 24;
    const std::vector<ExpertKey> keys =
        Layer0(std::vector<int>(all.begin(), all.begin() + n));
    if (prefetch) {
      // Half right, half wrong guesses, issued before the step.
      const int g0 = n / 2, g1 = std::min(24, g0 + 8);
      std::vector<int> guess(all.begin() + g0, all.begin() + g1);
      ASSERT_TRUE((*f)->Prefetch(Layer0(guess)).ok());
    }
    ASSERT_TRUE(FetchAndCheck(f->get(), keys).ok()) << "round " << round;
  }
  const FetchStats& st = (*f)->stats();
  if (cache == 0 && !prefetch) {
    EXPECT_EQ(st.reads, st.experts_requested);  // one read per key
  }
  EXPECT_LE(st.cache_hits + st.prefetch_hits, st.experts_requested);
  EXPECT_EQ(st.reads + st.cache_hits,
            st.experts_requested + st.prefetch_issued - st.prefetch_hits);
  EXPECT_EQ(st.run_bytes_read, st.reads * 1632);
  EXPECT_LE((*f)->cached_experts(), static_cast<size_t>(cache));
}

INSTANTIATE_TEST_SUITE_P(
    All, FetcherMatrixTest,
    ::testing::Combine(::testing::Values(1, 3, 24),
                       ::testing::Values(io::ReaderKind::kUring,
                                         io::ReaderKind::kPread),
                       ::testing::Values(0, 5), ::testing::Bool()));

TEST(ExpertFetcherTest, CacheHitsAreTrueResidentHits) {
  const ExpertIndex index = CacheIndex();
  FetcherOptions o;
  o.slots = 2;
  o.cache_slots = 4;
  o.reader = io::ReaderKind::kPread;
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({0, 1, 2, 3})).ok());
  EXPECT_EQ((*f)->stats().cache_hits, 0u);
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({0, 1, 2, 3})).ok());
  EXPECT_EQ((*f)->stats().cache_hits, 4u);
  EXPECT_EQ((*f)->stats().reads, 4u);
  // LRU: 4 evicts the least recently used (0); 2 stays resident.
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({4})).ok());
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({2})).ok());
  EXPECT_EQ((*f)->stats().cache_hits, 5u);
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({0})).ok());
  EXPECT_EQ((*f)->stats().cache_hits, 5u);
  EXPECT_EQ((*f)->stats().reads, 6u);
  EXPECT_DOUBLE_EQ((*f)->stats().cache_hit_rate(), 5.0 / 11.0);
  EXPECT_THAT((*f)->stats().ToString(), HasSubstr("cache hits 5"));
}

TEST(ExpertFetcherTest, CacheOffKeepsNothing) {
  const ExpertIndex index = CacheIndex();
  FetcherOptions o;
  o.slots = 24;
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({0, 1, 2})).ok());
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({0, 1, 2})).ok());
  EXPECT_EQ((*f)->stats().cache_hits, 0u);
  EXPECT_EQ((*f)->stats().reads, 6u);
}

TEST(ExpertFetcherTest, PrefetchHitsAndWaste) {
  const ExpertIndex index = CacheIndex();
  FetcherOptions o;
  o.slots = 4;
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Prefetch(Layer0({0, 1, 2, 3, 4, 5})).ok());
  EXPECT_EQ((*f)->stats().prefetch_issued, 4u);
  EXPECT_EQ((*f)->stats().prefetch_dropped, 2u);
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({1, 2, 7})).ok());
  const FetchStats& st = (*f)->stats();
  EXPECT_EQ(st.prefetch_hits, 2u);
  EXPECT_EQ(st.prefetch_wasted, 2u);  // 0 and 3: same layer, not asked for
  EXPECT_EQ(st.reads, 5u);
  EXPECT_DOUBLE_EQ(st.prefetch_hit_rate(), 0.5);
}

TEST(ExpertFetcherTest, LookaheadForNextLayerSurvivesTheStep) {
  auto source =
      model::SafetensorsCheckpoint::OpenDir(testing::K3Path("ckpt_A"));
  ASSERT_TRUE(source.ok());
  auto index = ExpertIndex::FromTensorSource(**source, {});
  ASSERT_TRUE(index.ok());
  FetcherOptions o;
  o.slots = 3;
  auto f = ExpertFetcher::Create(&*index, o);
  ASSERT_TRUE(f.ok());
  std::map<std::pair<int, int>, std::vector<uint8_t>> got;
  auto record = [&](const ExpertKey& k, const uint8_t* run) {
    const ExpertLocation* loc = index->Find(k);
    got[{k.layer, k.expert}].assign(run, run + loc->length);
    return absl::OkStatus();
  };
  const std::vector<ExpertKey> next = {{2, 0}, {2, 6}};
  ASSERT_TRUE(
      (*f)->Fetch({{1, 3}, {1, 4}, {1, 5}, {1, 7}}, record, &next).ok());
  EXPECT_EQ((*f)->stats().prefetch_issued, 2u);
  ASSERT_TRUE((*f)->Fetch({{2, 0}, {2, 1}}, record).ok());
  const FetchStats& st = (*f)->stats();
  EXPECT_EQ(st.prefetch_hits, 1u);
  EXPECT_EQ(st.prefetch_wasted, 1u);
  EXPECT_EQ(st.reads, 7u);
  for (const auto& [k, bytes] : got) {
    const ExpertLocation* loc = index->Find(ExpertKey{k.first, k.second});
    EXPECT_EQ(bytes,
              testing::ReadBytes(index->files()[0], loc->offset, loc->length))
        << k.first << "/" << k.second;
  }
}

TEST(ExpertFetcherTest, PrefetchesAreVerifiedAsTheyLandWhileAFetchWaits) {
  auto source =
      model::SafetensorsCheckpoint::OpenDir(testing::K3Path("ckpt_A"));
  ASSERT_TRUE(source.ok());
  auto index = ExpertIndex::FromTensorSource(**source, {});
  ASSERT_TRUE(index.ok());
  for (const ExpertKey& k : {ExpertKey{1, 3}, ExpertKey{2, 6}}) {
    const ExpertLocation* loc = index->Find(k);
    const std::vector<uint8_t> run =
        testing::ReadBytes(index->files()[loc->file], loc->offset, loc->length);
    ASSERT_TRUE(
        index->SetChecksum(k, io::Checksum64(run.data(), run.size())).ok());
  }
  ASSERT_TRUE(index->SetChecksum(ExpertKey{2, 0}, 0x1234).ok());  // corrupt
  FetcherOptions o;
  o.slots = 4;
  // One pread thread completes reads in the order they were queued: both
  // prefetches land while the Fetch below waits for its own read.
  o.reader = io::ReaderKind::kPread;
  o.queue_depth = 1;
  auto f = ExpertFetcher::Create(&*index, o);
  ASSERT_TRUE(f.ok());
  auto ignore = [](const ExpertKey&, const uint8_t*) {
    return absl::OkStatus();
  };
  ASSERT_TRUE((*f)->Prefetch({{2, 0}, {2, 6}}).ok());
  ASSERT_TRUE((*f)->Fetch({{1, 3}}, ignore).ok());
  // Both prefetches and the fetched run were hashed; the bad prefetch was
  // dropped as it landed, without failing a step that did not need it.
  EXPECT_EQ((*f)->stats().checksums_verified, 3u);
  // The good prefetch is used without hashing it again.
  ASSERT_TRUE((*f)->Fetch({{2, 6}}, ignore).ok());
  EXPECT_EQ((*f)->stats().checksums_verified, 3u);
  EXPECT_EQ((*f)->stats().prefetch_hits, 1u);
  // The bad one is read again on demand and fails there, by name.
  const uint64_t reads = (*f)->stats().reads;
  absl::Status s = (*f)->Fetch({{2, 0}}, ignore);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("layer 2 expert 0"));
  EXPECT_EQ((*f)->stats().reads, reads + 1);
}

TEST(ExpertFetcherTest, ChecksumMismatchNamesLayerExpertFileOffset) {
  ExpertIndex index = CacheIndex();
  ASSERT_TRUE(SetFixtureChecksums(&index).ok());
  ASSERT_TRUE(index.SetChecksum(ExpertKey{0, 9}, 0x1234).ok());
  FetcherOptions o;
  o.slots = 3;
  o.cache_slots = 2;
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok());
  absl::Status s = FetchAndCheck(f->get(), Layer0({1, 9, 2}));
  ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  const ExpertLocation* loc = index.Find(ExpertKey{0, 9});
  EXPECT_THAT(s.message(), HasSubstr("layer 0 expert 9"));
  EXPECT_THAT(s.message(), HasSubstr(CacheFixturePath()));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("offset ", loc->offset)));
  // The fetcher stays usable, verified runs still check, the bad run was
  // not cached.
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({1, 2, 3})).ok());
  EXPECT_FALSE(FetchAndCheck(f->get(), Layer0({9})).ok());
  EXPECT_GE((*f)->stats().checksums_verified, 3u);
  // Verification off: the run is handed out as is.
  o.verify_checksums = false;
  auto unchecked = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(unchecked.ok());
  EXPECT_TRUE(FetchAndCheck(unchecked->get(), Layer0({9})).ok());
}

TEST(ExpertFetcherTest, FlippedByteOnDiskIsCaught) {
  testing::TempDir dir;
  const std::string copy =
      dir.CopyIn(CacheFixturePath(), "experts.safetensors");
  ExpertIndex index = CacheIndex(copy);
  ASSERT_TRUE(SetFixtureChecksums(&index).ok());
  const ExpertLocation* loc = index.Find(ExpertKey{0, 17});
  testing::FlipByte(copy, loc->offset + 1000);
  auto f = ExpertFetcher::Create(&index, FetcherOptions());
  ASSERT_TRUE(f.ok());
  absl::Status s = (*f)->Fetch(
      Layer0({16, 17, 18}),
      [](const ExpertKey&, const uint8_t*) { return absl::OkStatus(); });
  ASSERT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("layer 0 expert 17 in " + copy + " at offset " +
                        std::to_string(loc->offset)));
}

TEST(ExpertFetcherTest, LandedRunsAreHashedTogetherOnThePool) {
  ExpertIndex index = CacheIndex();
  ASSERT_TRUE(SetFixtureChecksums(&index).ok());
  ASSERT_TRUE(index.SetChecksum(ExpertKey{0, 9}, 0x1234).ok());  // corrupt
  kernels::ThreadPool pool(2);
  FetcherOptions o;
  o.slots = 8;
  o.pool = &pool;
  // Reads land inside Submit: a Fetch finds its prefetched runs landed.
  o.reader_factory = testutil::SyncReaderFactory();
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok()) << f.status();
  // Five landed runs: two groups of two hashed on the pool, the fifth alone
  // as it is consumed; every run checked against the fixture.
  ASSERT_TRUE((*f)->Prefetch(Layer0({1, 2, 3, 4, 5})).ok());
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({1, 2, 3, 4, 5})).ok());
  EXPECT_EQ((*f)->stats().checksums_verified, 5u);
  EXPECT_EQ((*f)->stats().checksums_verified_together, 4u);
  // A mismatch in a group fails the Fetch by name before the group's runs
  // are used.
  ASSERT_TRUE((*f)->Prefetch(Layer0({8, 9, 10, 11})).ok());
  std::map<int, int> calls;
  absl::Status s = (*f)->Fetch(Layer0({8, 9, 10, 11}),
                               [&](const ExpertKey& key, const uint8_t*) {
                                 ++calls[key.expert];
                                 return absl::OkStatus();
                               });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("layer 0 expert 9"));
  EXPECT_EQ(calls.count(9), 0u);
  EXPECT_EQ(calls.count(8), 0u);
  // The fetcher stays usable and still refuses the bad run.
  ASSERT_TRUE(FetchAndCheck(f->get(), Layer0({8, 10, 11})).ok());
  EXPECT_EQ(
      (*f)->Fetch(Layer0({9}), [](const ExpertKey&,
                                  const uint8_t*) { return absl::OkStatus(); })
          .code(),
      absl::StatusCode::kDataLoss);
}

TEST(ExpertFetcherTest, BadRequestsAndCallbackErrors) {
  const ExpertIndex index = CacheIndex();
  FetcherOptions o;
  o.slots = 2;
  auto f = ExpertFetcher::Create(&index, o);
  ASSERT_TRUE(f.ok());
  auto ok = [](const ExpertKey&, const uint8_t*) { return absl::OkStatus(); };
  EXPECT_EQ((*f)->Fetch(Layer0({1, 2, 1}), ok).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*f)->Fetch(Layer0({24}), ok).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*f)->Fetch({{1, 0}}, ok).code(), absl::StatusCode::kNotFound);
  absl::Status s = (*f)->Fetch(Layer0({3, 4, 5, 6, 7}), [](const ExpertKey& k,
                                                           const uint8_t*) {
    return k.expert == 5 ? absl::CancelledError("stop at 5") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(FetchAndCheck(f->get(), Layer0({3, 4, 5, 6, 7})).ok());
  EXPECT_TRUE(FetchAndCheck(f->get(), {}).ok());
}

TEST(ExpertFetcherTest, MemoryIsChargedAndBounded) {
  const ExpertIndex index = CacheIndex();
  io::MemoryAccountant accountant(1 << 20);
  FetcherOptions o;
  o.slots = 3;
  o.cache_slots = 2;
  o.accountant = &accountant;
  {
    auto f = ExpertFetcher::Create(&index, o);
    ASSERT_TRUE(f.ok());
    // 1632-byte runs, some straddling a 4 KiB boundary.
    const uint64_t slot = (*f)->slot_bytes();
    EXPECT_EQ(slot, index.max_aligned_run_bytes());
    EXPECT_EQ(slot % 4096, 0u);
    EXPECT_EQ(accountant.owner_bytes("experts.slots"), 3 * slot);
    EXPECT_EQ(accountant.owner_bytes("experts.cache"), 2 * slot);
    EXPECT_EQ((*f)->buffer_bytes(), 5 * slot);
  }
  EXPECT_EQ(accountant.used(), 0u);
  io::MemoryAccountant tiny(3 * index.max_aligned_run_bytes());
  o.accountant = &tiny;
  auto f = ExpertFetcher::Create(&index, o);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(tiny.used(), 0u);
}

}  // namespace
}  // namespace flotilla::experts
