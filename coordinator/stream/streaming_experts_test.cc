// StreamingExperts must give exactly LocalExperts' bytes on the reference
// checkpoints, whatever the slot count, reader, cache and lookahead, and must
// refuse runs whose checksum does not match.
#include "coordinator/stream/streaming_experts.h"

#include <cstring>
#include <random>

#include "coordinator/model/local_experts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/checksum.h"
#include "shared/model/safetensors.h"
#include "shared/testing/experts_test_util.h"
#include "shared/testing/flat_f32_source.h"

namespace flotilla::coordinator {
namespace {

using experts::ExpertIndex;
using experts::ExpertKey;
using experts::testing::K3Path;
using ::testing::HasSubstr;

struct Step {
  int rows = 0;
  std::vector<float> z;
  std::vector<ExpertTask> tasks;
};

// `rows` tokens routed to top-k distinct experts each, tasks in token order
// (as MoeForward emits them), random weights.
Step RandomStep(const model::K3Config& c, int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::uniform_real_distribution<float> uni(0.01f, 1.f);
  Step s;
  s.rows = rows;
  s.z.resize(static_cast<size_t>(rows) * c.routed_expert_hidden_size);
  for (float& v : s.z) v = normal(rng);
  std::vector<int> experts(c.num_experts);
  for (int r = 0; r < rows; ++r) {
    for (int e = 0; e < c.num_experts; ++e) experts[e] = e;
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int j = 0; j < c.num_experts_per_token; ++j) {
      s.tasks.push_back(ExpertTask{r, experts[j], uni(rng)});
    }
  }
  return s;
}

// Computes step `s` of `layer` with both backends; success when the outputs
// are memcmp-identical. `got` starts at -7 so that a row `got_from` leaves
// unwritten cannot pass as zeros.
::testing::AssertionResult SameLayerOutputs(ExpertBackend& want_from,
                                            ExpertBackend& got_from, int layer,
                                            const Step& s, size_t width) {
  std::vector<float> want(s.rows * width), got(s.rows * width, -7.f);
  absl::Status st =
      want_from.ComputeLayer(layer, s.z.data(), s.rows, s.tasks, want.data());
  if (st.ok()) {
    st = got_from.ComputeLayer(layer, s.z.data(), s.rows, s.tasks, got.data());
  }
  if (!st.ok()) return ::testing::AssertionFailure() << st;
  if (std::memcmp(want.data(), got.data(), want.size() * 4) != 0) {
    return ::testing::AssertionFailure() << "outputs differ";
  }
  return ::testing::AssertionSuccess();
}

// Runs every MoE layer twice through both backends; outputs must be
// memcmp-identical.
void ExpectSameAsLocal(const std::string& dir,
                       const StreamingExpertsOptions& options,
                       const pack::PackManifest* manifest = nullptr) {
  const model::K3Config c =
      experts::testing::LoadConfigOrDie(dir + "/config.json");
  kernels::ThreadPool pool(2);
  auto source = model::SafetensorsCheckpoint::OpenDir(dir);
  ASSERT_TRUE(source.ok()) << source.status();
  auto local = LocalExperts::Create(source->get(), c.Moe(), &pool);
  ASSERT_TRUE(local.ok()) << local.status();
  auto streaming =
      StreamingExperts::Create(dir, c.Moe(), manifest, "", &pool, options);
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  const size_t lat = c.routed_expert_hidden_size;
  uint32_t seed = 7;
  for (int pass = 0; pass < 2; ++pass) {
    for (int layer = c.first_k_dense_replace; layer < c.num_hidden_layers;
         ++layer) {
      const Step s = RandomStep(c, 1 + (seed % 6), seed);
      ++seed;
      // A (partly right) guess for this layer, read before it computes.
      ASSERT_TRUE((*streaming)
                      ->PrefetchLayer(
                          layer, {0, 2, s.tasks[0].expert, c.num_experts - 1})
                      .ok());
      ASSERT_TRUE(SameLayerOutputs(**local, **streaming, layer, s, lat))
          << dir << " layer " << layer << " pass " << pass;
    }
  }
  const experts::FetchStats& st = (*streaming)->stats();
  EXPECT_GT(st.reads, 0u);
  const ExpertBackendStats backend = (*streaming)->backend_stats();
  EXPECT_EQ(backend.bytes_read, st.bytes_read);
  EXPECT_EQ(backend.experts_used, st.experts_requested);
  if (options.cache_bytes > 0) {
    EXPECT_GT(st.cache_hits, 0u);
  }
  if (options.lookahead) {
    EXPECT_GT(st.prefetch_hits, 0u);
  }
  if (manifest != nullptr) {
    EXPECT_GT(st.checksums_verified, 0u);
  }
  EXPECT_THAT((*streaming)->StatsReport(), HasSubstr("expert streaming"));
}

TEST(StreamingExpertsTest, MatchesLocalExpertsOnCkptA) {
  StreamingExpertsOptions o;
  o.slots = 4;
  ExpectSameAsLocal(K3Path("ckpt_A"), o);
}

TEST(StreamingExpertsTest, MatchesLocalExpertsOnCkptCOneSlotPread) {
  StreamingExpertsOptions o;
  o.slots = 1;
  o.reader = io::ReaderKind::kPread;
  ExpectSameAsLocal(K3Path("ckpt_C"), o);
}

TEST(StreamingExpertsTest, MatchesLocalExpertsWithCacheAndLookahead) {
  StreamingExpertsOptions o;
  o.slots = 6;
  o.cache_bytes = 8 << 20;  // every expert of both checkpoints fits
  o.lookahead = true;
  ExpectSameAsLocal(K3Path("ckpt_C"), o);
  ExpectSameAsLocal(K3Path("ckpt_A"), o);
}

// A manifest locating ckpt_A's experts in place, with run checksums.
pack::PackManifest Manifest(const std::string& dir) {
  auto source = model::SafetensorsCheckpoint::OpenDir(dir);
  auto index = ExpertIndex::FromTensorSource(**source, {});
  EXPECT_TRUE(index.ok()) << index.status();
  pack::PackManifest m;
  m.complete = true;
  m.expert_files = {"model.safetensors"};
  for (const ExpertKey& key : index->Keys()) {
    const experts::ExpertLocation* loc = index->Find(key);
    pack::PackExpert e;
    e.layer = key.layer;
    e.expert = key.expert;
    e.offset = loc->offset;
    e.length = loc->length;
    e.tensor_offsets = loc->tensor_offsets;
    const std::vector<uint8_t> run = experts::testing::ReadBytes(
        index->files()[0], loc->offset, loc->length);
    e.checksum = io::Checksum64(run.data(), run.size());
    m.experts.push_back(e);
  }
  return m;
}

TEST(StreamingExpertsTest, PackManifestVerifiedAndIdentical) {
  const pack::PackManifest m = Manifest(K3Path("ckpt_A"));
  StreamingExpertsOptions o;
  o.slots = 3;
  ExpectSameAsLocal(K3Path("ckpt_A"), o, &m);
}

TEST(StreamingExpertsTest, ChecksumMismatchNamesLayerExpertFileOffset) {
  const std::string dir = K3Path("ckpt_A");
  const model::K3Config c =
      experts::testing::LoadConfigOrDie(dir + "/config.json");
  pack::PackManifest m = Manifest(dir);
  pack::PackExpert* bad = nullptr;
  for (pack::PackExpert& e : m.experts) {
    if (e.layer == 6 && e.expert == 3) bad = &e;
  }
  ASSERT_NE(bad, nullptr);
  bad->checksum ^= 1;
  auto streaming = StreamingExperts::Create(dir, c.Moe(), &m, "/unused",
                                            nullptr, StreamingExpertsOptions());
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  const Step s = RandomStep(c, 4, 3);
  std::vector<ExpertTask> tasks = s.tasks;
  tasks.push_back(ExpertTask{0, 3, 0.5f});  // make sure expert 3 is used
  std::vector<float> out(s.rows * c.routed_expert_hidden_size);
  absl::Status st =
      (*streaming)->ComputeLayer(6, s.z.data(), s.rows, tasks, out.data());
  ASSERT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("layer 6 expert 3"));
  EXPECT_THAT(st.message(), HasSubstr(dir + "/model.safetensors"));
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("offset ", bad->offset)));
  // Other layers still work.
  EXPECT_TRUE((*streaming)
                  ->ComputeLayer(5, s.z.data(), s.rows, s.tasks, out.data())
                  .ok());
}

TEST(StreamingExpertsTest, RepeatedLayerHitsTheCache) {
  const std::string dir = K3Path("ckpt_C");
  const model::K3Config c =
      experts::testing::LoadConfigOrDie(dir + "/config.json");
  StreamingExpertsOptions o;
  o.slots = 4;
  o.cache_bytes = 1 << 20;  // room for every expert of a layer
  auto streaming =
      StreamingExperts::Create(dir, c.Moe(), nullptr, "", nullptr, o);
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  const Step s = RandomStep(c, 6, 11);
  std::vector<float> first(s.rows * c.routed_expert_hidden_size);
  std::vector<float> again(first.size());
  ASSERT_TRUE((*streaming)
                  ->ComputeLayer(2, s.z.data(), s.rows, s.tasks, first.data())
                  .ok());
  const uint64_t reads = (*streaming)->stats().reads;
  EXPECT_EQ((*streaming)->stats().cache_hits, 0u);
  ASSERT_TRUE((*streaming)
                  ->ComputeLayer(2, s.z.data(), s.rows, s.tasks, again.data())
                  .ok());
  EXPECT_EQ((*streaming)->stats().reads, reads);  // nothing re-read
  EXPECT_EQ((*streaming)->stats().cache_hits, reads);
  EXPECT_DOUBLE_EQ((*streaming)->stats().cache_hit_rate(), 0.5);
  EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * 4), 0);
}

TEST(StreamingExpertsTest, PrefetchLayerIsUsedByTheNextStep) {
  const std::string dir = K3Path("ckpt_A");
  const model::K3Config c =
      experts::testing::LoadConfigOrDie(dir + "/config.json");
  StreamingExpertsOptions o;
  o.slots = 4;
  auto off = StreamingExperts::Create(dir, c.Moe(), nullptr, "", nullptr, o);
  ASSERT_TRUE(off.ok());
  ASSERT_TRUE((*off)->PrefetchLayer(3, {1, 2}).ok());  // lookahead off: no-op
  EXPECT_EQ((*off)->stats().prefetch_issued, 0u);
  o.lookahead = true;
  auto on = StreamingExperts::Create(dir, c.Moe(), nullptr, "", nullptr, o);
  ASSERT_TRUE(on.ok());
  ASSERT_TRUE((*on)->PrefetchLayer(3, {1, 2, 99}).ok());  // 99: ignored
  EXPECT_EQ((*on)->stats().prefetch_issued, 2u);
  std::vector<float> z(2 * 64, 0.5f), out(2 * 64);
  const std::vector<ExpertTask> tasks = {{0, 1, 0.5f}, {1, 4, 0.5f}};
  ASSERT_TRUE((*on)->ComputeLayer(3, z.data(), 2, tasks, out.data()).ok());
  EXPECT_EQ((*on)->stats().prefetch_hits, 1u);
  EXPECT_EQ((*on)->stats().prefetch_wasted, 1u);
  EXPECT_EQ((*on)->stats().reads, 3u);
}

TEST(StreamingExpertsTest, DenseOracleExpertsMatchLocal) {
  auto source = model::FlatF32Source::Open(K3Path("oracle/tiny_k3.json"),
                                           K3Path("oracle/tiny_k3.bin"));
  ASSERT_TRUE(source.ok()) << source.status();
  auto c = model::ParseK3Config((*source)->config_json(), "tiny_k3.json");
  ASSERT_TRUE(c.ok()) << c.status();
  experts::ExpertIndexOptions io;
  const model::MoeSpec moe_c = (*c).Moe();
  io.config = &moe_c;
  auto index = ExpertIndex::FromTensorSource(**source, io);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->format(), experts::ExpertFormat::kF32);
  auto local = LocalExperts::Create(source->get(), (*c).Moe(), nullptr);
  ASSERT_TRUE(local.ok()) << local.status();
  StreamingExpertsOptions o;
  o.slots = 2;
  auto streaming = StreamingExperts::FromIndex(std::move(index).value(),
                                               (*c).Moe(), nullptr, o);
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  for (int layer = 1; layer < c->num_hidden_layers; layer += 3) {
    const Step s = RandomStep(*c, 3, layer);
    EXPECT_TRUE(SameLayerOutputs(**local, **streaming, layer, s,
                                 c->routed_expert_hidden_size))
        << "layer " << layer;
  }
}

}  // namespace
}  // namespace flotilla::coordinator
