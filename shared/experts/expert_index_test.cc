#include "shared/experts/expert_index.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/io/checksum.h"
#include "shared/model/safetensors.h"
#include "shared/testing/experts_test_util.h"

namespace flotilla::experts {
namespace {

using model::DType;
using testing::CacheFixturePath;
using testing::FakeSource;
using ::testing::HasSubstr;
using testing::K3Path;

std::string Name(int layer, int e, int w, const char* suffix) {
  return absl::StrCat("language_model.model.layers.", layer,
                      ".block_sparse_moe.experts.", e, ".w", w, ".", suffix);
}

// One MXFP4 expert with [rows][cols] w1/w3 and [cols][rows] w2, its six
// tensors laid out from `offset` in order, `gap` bytes after w2.scale.
void AddMxfp4Expert(FakeSource* s, int layer, int e, const std::string& file,
                    uint64_t offset, uint64_t gap, int rows = 32,
                    int cols = 64) {
  for (int w = 1; w <= 3; ++w) {
    const int r = w == 2 ? cols : rows, c = w == 2 ? rows : cols;
    s->Add(Name(layer, e, w, "weight_packed"), DType::kU8, {r, c / 2}, file,
           offset);
    offset += r * c / 2;
    s->Add(Name(layer, e, w, "weight_scale"), DType::kU8, {r, c / 32}, file,
           offset);
    offset += r * c / 32;
    if (w == 2) offset += gap;
  }
}

TEST(ExpertIndexTest, CkptAMatchesConfigAndHeaders) {
  const model::K3Config c =
      testing::LoadConfigOrDie(K3Path("ckpt_A/config.json"));
  auto source = model::SafetensorsCheckpoint::OpenDir(K3Path("ckpt_A"));
  ASSERT_TRUE(source.ok()) << source.status();
  ExpertIndexOptions options;
  const model::MoeSpec moe_c = c.Moe();
  options.config = &moe_c;
  auto index = ExpertIndex::FromTensorSource(**source, options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), 12u * 8u);  // layers 1..12, 8 experts
  EXPECT_EQ(index->format(), ExpertFormat::kMxfp4);
  EXPECT_EQ(index->shape(0).rows, 64u);
  EXPECT_EQ(index->shape(1).cols, 64u);
  EXPECT_FALSE(index->HasLayer(0));
  EXPECT_TRUE(index->HasLayer(12));
  EXPECT_EQ(index->noncontiguous_experts(), 0u);
  const uint64_t run = ExpertIndex::RunBytesFor(c.Moe(), ExpertFormat::kMxfp4);
  EXPECT_EQ(run, 6528u);
  EXPECT_EQ(index->max_run_bytes(), run);
  EXPECT_LE(index->max_aligned_run_bytes(), ExpertIndex::SlotBytesFor(run));
  for (const ExpertKey& key : index->Keys()) {
    const ExpertLocation* loc = index->Find(key);
    ASSERT_NE(loc, nullptr);
    EXPECT_EQ(loc->length, run);
    EXPECT_FALSE(loc->has_checksum);
    const model::TensorInfo* w3s =
        (*source)->Find(Name(key.layer, key.expert, 3, "weight_scale"));
    EXPECT_EQ(loc->offset + loc->tensor_offsets[kW3Scale], w3s->offset);
  }
  const ExpertLocation* loc = index->Find(ExpertKey{1, 0});
  EXPECT_EQ(loc->tensor_offsets,
            (TensorOffsets{0, 2048, 2176, 4224, 4352, 6400}));
  // The plan's estimate of what the index keeps is its real size give or
  // take the file names' length (13 layers x 8 experts, one file here).
  const uint64_t estimate =
      ExpertIndex::MemoryBytesFor(c.num_hidden_layers, c.num_experts,
                                  static_cast<int>(index->files().size()));
  EXPECT_GE(index->memory_bytes(), 13u * 8u * sizeof(ExpertLocation));
  EXPECT_NEAR(static_cast<double>(index->memory_bytes()),
              static_cast<double>(estimate), 0.05 * estimate);
}

TEST(ExpertIndexTest, RealK3RunSize) {
  model::K3Config c;
  c.routed_expert_hidden_size = 3584;
  c.moe_intermediate_size = 3072;
  EXPECT_EQ(ExpertIndex::RunBytesFor(c.Moe(), ExpertFormat::kMxfp4), 17547264u);
  EXPECT_EQ(ExpertIndex::SlotBytesFor(17547264), 17547264u + 4096);
}

TEST(ExpertIndexTest, CacheFixtureWithoutConfig) {
  auto source = model::SafetensorsCheckpoint::OpenFile(CacheFixturePath());
  ASSERT_TRUE(source.ok()) << source.status();
  auto index = ExpertIndex::FromTensorSource(**source, {});
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), 24u);
  EXPECT_EQ(index->num_layers(), 1);
  EXPECT_EQ(index->max_run_bytes(), 1632u);
  EXPECT_EQ(index->shape(1).rows, 8u);
  EXPECT_EQ(index->shape(1).cols, 128u);
  EXPECT_EQ(index->files().size(), 1u);
  EXPECT_THAT(index->Describe(ExpertKey{0, 3}),
              HasSubstr("layer 0 expert 3 ("));
}

TEST(ExpertIndexTest, ConfigMismatchNamesMissingTensor) {
  // ckpt_A has 8 experts per layer; ckpt_C's config asks for 32.
  const model::K3Config c =
      testing::LoadConfigOrDie(K3Path("ckpt_C/config.json"));
  auto source = model::SafetensorsCheckpoint::OpenDir(K3Path("ckpt_A"));
  ASSERT_TRUE(source.ok());
  ExpertIndexOptions options;
  const model::MoeSpec moe_c = c.Moe();
  options.config = &moe_c;
  auto index = ExpertIndex::FromTensorSource(**source, options);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(),
              HasSubstr("experts.8.w1.weight_packed"));
  // only_layer restricts both the scan and the completeness check.
  const model::K3Config a =
      testing::LoadConfigOrDie(K3Path("ckpt_A/config.json"));
  const model::MoeSpec moe_a = a.Moe();
  options.config = &moe_a;
  options.only_layer = 5;
  index = ExpertIndex::FromTensorSource(**source, options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), 8u);
  EXPECT_TRUE(index->HasLayer(5));
  EXPECT_FALSE(index->HasLayer(4));
}

TEST(ExpertIndexTest, SmallGapIsOneSpanLargeGapNeedsPack) {
  FakeSource s;
  AddMxfp4Expert(&s, 1, 0, "/shard1", 4000, /*gap=*/100);
  auto index = ExpertIndex::FromTensorSource(s, {});
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->noncontiguous_experts(), 1u);
  const ExpertLocation* loc = index->Find(ExpertKey{1, 0});
  EXPECT_EQ(loc->offset, 4000u);
  EXPECT_EQ(loc->length, 3u * (1024 + 64) + 100);
  EXPECT_EQ(loc->tensor_offsets[kW3Packed], 2u * 1088 + 100);

  FakeSource far;
  AddMxfp4Expert(&far, 1, 0, "/shard1", 4000, /*gap=*/2 << 20);
  index = ExpertIndex::FromTensorSource(far, {});
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(index.status().message(), HasSubstr("flotilla-tool pack"));
  EXPECT_THAT(index.status().message(), HasSubstr("/shard1"));
}

TEST(ExpertIndexTest, ValidationErrorsNameTensorAndFile) {
  {
    FakeSource s;  // w2.scale in another shard
    AddMxfp4Expert(&s, 1, 0, "/a", 0, 0);
    s.Add(Name(1, 0, 2, "weight_scale"), DType::kU8, {64, 1}, "/b", 0);
    auto index = ExpertIndex::FromTensorSource(s, {});
    ASSERT_FALSE(index.ok());
    EXPECT_THAT(index.status().message(),
                HasSubstr(Name(1, 0, 2, "weight_scale") + " in /b"));
  }
  {
    FakeSource s;  // wrong dtype
    AddMxfp4Expert(&s, 1, 0, "/a", 0, 0);
    s.Add(Name(1, 0, 1, "weight_packed"), DType::kBF16, {32, 32}, "/a", 0);
    auto index = ExpertIndex::FromTensorSource(s, {});
    ASSERT_FALSE(index.ok());
    EXPECT_THAT(index.status().message(),
                HasSubstr(Name(1, 0, 1, "weight_packed") + " in /a has dtype"));
  }
  {
    FakeSource s;  // scale columns do not match packed columns
    AddMxfp4Expert(&s, 1, 0, "/a", 0, 0);
    s.Add(Name(1, 0, 3, "weight_scale"), DType::kU8, {32, 3}, "/a", 5000);
    auto index = ExpertIndex::FromTensorSource(s, {});
    ASSERT_FALSE(index.ok());
    EXPECT_THAT(index.status().message(), HasSubstr("group size 32"));
  }
  {
    FakeSource s;  // row counts differ
    AddMxfp4Expert(&s, 1, 0, "/a", 0, 0);
    s.Add(Name(1, 0, 3, "weight_scale"), DType::kU8, {31, 2}, "/a", 5000);
    auto index = ExpertIndex::FromTensorSource(s, {});
    ASSERT_FALSE(index.ok());
    EXPECT_THAT(index.status().message(), HasSubstr("has 31 rows"));
  }
  {
    FakeSource s;  // scale missing
    s.Add(Name(1, 0, 1, "weight_packed"), DType::kU8, {8, 32}, "/a", 0);
    auto index = ExpertIndex::FromTensorSource(s, {});
    ASSERT_FALSE(index.ok());
    EXPECT_EQ(index.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(index.status().message(),
                HasSubstr(Name(1, 0, 1, "weight_scale")));
  }
  {
    FakeSource s;  // experts with different shapes
    AddMxfp4Expert(&s, 1, 0, "/a", 0, 0, 32, 64);
    AddMxfp4Expert(&s, 1, 1, "/a", 10000, 0, 64, 64);
    auto index = ExpertIndex::FromTensorSource(s, {});
    ASSERT_FALSE(index.ok());
    EXPECT_THAT(index.status().message(), HasSubstr("other experts have"));
  }
}

TEST(ExpertIndexTest, DenseExperts) {
  FakeSource s;
  uint64_t off = 64;
  for (int w = 1; w <= 3; ++w) {
    const std::vector<int64_t> shape =
        w == 2 ? std::vector<int64_t>{16, 8} : std::vector<int64_t>{8, 16};
    s.Add(Name(2, 0, w, "weight"), DType::kBF16, shape, "/d", off);
    off += 8 * 16 * 2;
  }
  auto index = ExpertIndex::FromTensorSource(s, {});
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->format(), ExpertFormat::kBF16);
  EXPECT_EQ(index->Find(ExpertKey{2, 0})->tensor_offsets[2], 512u);
  EXPECT_EQ(index->Find(ExpertKey{2, 0})->length, 768u);
}

// A manifest describing ckpt_A's experts in place, as `pack` would write it.
pack::PackManifest CkptAManifest(const ExpertIndex& index) {
  pack::PackManifest m;
  m.complete = true;
  m.expert_format = "mxfp4";
  m.experts_in_model_dir = true;
  m.expert_files = {"model.safetensors"};
  for (const ExpertKey& key : index.Keys()) {
    const ExpertLocation* loc = index.Find(key);
    pack::PackExpert e;
    e.layer = key.layer;
    e.expert = key.expert;
    e.offset = loc->offset;
    e.length = loc->length;
    e.tensor_offsets = loc->tensor_offsets;
    const std::vector<uint8_t> run =
        testing::ReadBytes(index.files()[loc->file], loc->offset, loc->length);
    e.checksum = io::Checksum64(run.data(), run.size());
    m.experts.push_back(e);
  }
  return m;
}

TEST(ExpertIndexTest, FromPackManifest) {
  const model::K3Config c =
      testing::LoadConfigOrDie(K3Path("ckpt_A/config.json"));
  auto source = model::SafetensorsCheckpoint::OpenDir(K3Path("ckpt_A"));
  ASSERT_TRUE(source.ok());
  auto scanned = ExpertIndex::FromTensorSource(**source, {});
  ASSERT_TRUE(scanned.ok());
  pack::PackManifest m = CkptAManifest(*scanned);
  auto index = ExpertIndex::FromPackManifest(m, c.Moe(), K3Path("ckpt_A"),
                                             "/nonexistent");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), scanned->size());
  EXPECT_EQ(index->files()[0], K3Path("ckpt_A") + "/model.safetensors");
  const ExpertLocation* loc = index->Find(ExpertKey{3, 2});
  EXPECT_TRUE(loc->has_checksum);
  EXPECT_EQ(loc->offset, scanned->Find(ExpertKey{3, 2})->offset);

  pack::PackManifest bad = m;
  bad.experts[5].length = 100;  // tensors no longer fit
  index = ExpertIndex::FromPackManifest(bad, c.Moe(), K3Path("ckpt_A"), "/p");
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("experts[5]"));
  bad = m;
  bad.experts.pop_back();  // layer 12 expert 7 missing
  index = ExpertIndex::FromPackManifest(bad, c.Moe(), K3Path("ckpt_A"), "/p");
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("experts.7.w1"));
  bad = m;
  bad.complete = false;
  EXPECT_FALSE(
      ExpertIndex::FromPackManifest(bad, c.Moe(), K3Path("ckpt_A"), "/p").ok());
}

}  // namespace
}  // namespace flotilla::experts
