// Reading well-formed checkpoints: the st/ edge-case shards of FORMAT.md 4.3
// and the tiny ckpt_A / ckpt_C checkpoints.
#include "shared/model/safetensors.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/float16.h"

namespace flotilla::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kK3 = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/";
const std::string kSt = kK3 + "fixtures/st/";
const std::string kShard1 = kSt + "model-00001-of-00002.safetensors";
const std::string kWeird = "weird\\name.\"with\"quotes";

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Independent F16 decoding (ldexp on the fields) to cross-check F16ToF32.
float F16Reference(uint16_t h) {
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exp == 31) {
    return mant ? std::numeric_limits<float>::quiet_NaN()
                : sign * std::numeric_limits<float>::infinity();
  }
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  return sign * std::ldexp(static_cast<float>(mant + 1024), exp - 25);
}

std::vector<uint8_t> Raw(const TensorSource& src, const std::string& name) {
  const TensorInfo* info = src.Find(name);
  EXPECT_NE(info, nullptr) << name;
  if (info == nullptr) return {};
  std::vector<uint8_t> out(info->nbytes);
  absl::Status s = src.ReadRaw(*info, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

class StFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ckpt = SafetensorsCheckpoint::OpenDir(kSt);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    ckpt_ = std::move(*ckpt);
  }
  std::unique_ptr<SafetensorsCheckpoint> ckpt_;
};

TEST_F(StFixtureTest, ListsBothShardsAndSkipsMetadata) {
  std::vector<std::string> names = ckpt_->Names();
  EXPECT_EQ(names.size(), 13u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(ckpt_->Find("__metadata__"), nullptr);
  EXPECT_NE(ckpt_->Find("second.shard.f32"), nullptr);
  EXPECT_NE(ckpt_->Find("language_model.model.layers.0.block_sparse_moe."
                        "experts.1.w1.weight_packed"),
            nullptr);
  EXPECT_EQ(ckpt_->Find("nope"), nullptr);
}

TEST_F(StFixtureTest, UnalignedHeaderGivesUnalignedOffsets) {
  const TensorInfo* t = ckpt_->Find("plain.f32.2d");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->offset, 8u + 1022u);  // header length 1022: 1022 % 8 == 6
  EXPECT_EQ(t->file, kShard1);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_THAT(t->shape, ElementsAre(16, 16));
  auto v = ckpt_->ReadF32("plain.f32.2d", 256);
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<uint8_t> raw = Raw(*ckpt_, "plain.f32.2d");
  ASSERT_EQ(raw.size(), 1024u);
  EXPECT_EQ(std::memcmp(raw.data(), v->data(), 1024), 0);
  EXPECT_FLOAT_EQ((*v)[1], 0.8962366f);
}

TEST_F(StFixtureTest, Bf16WidensBitExactly) {
  auto v = ckpt_->ReadF32("plain.bf16.1d", 128);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Bits((*v)[0]), 0x7F800000u);  // +inf
  EXPECT_EQ(Bits((*v)[1]), 0xFF800000u);  // -inf
  EXPECT_EQ(Bits((*v)[2]), 0x7FC00000u);  // NaN
  EXPECT_EQ(Bits((*v)[3]), 0x00000000u);  // +0
  EXPECT_EQ(Bits((*v)[4]), 0x80000000u);  // -0
  EXPECT_EQ((*v)[5], std::numeric_limits<float>::min());
  std::vector<uint8_t> raw = Raw(*ckpt_, "plain.bf16.1d");
  for (size_t i = 0; i < 128; ++i) {
    uint32_t want = (raw[2 * i] | (raw[2 * i + 1] << 8)) << 16;
    ASSERT_EQ(Bits((*v)[i]), want) << i;
  }
}

TEST_F(StFixtureTest, F16WidensExactly) {
  auto v = ckpt_->ReadF32("tricky.f16.1d", 64);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Bits((*v)[0]), 0x7F800000u);  // +inf
  EXPECT_EQ(Bits((*v)[1]), 0xFF800000u);  // -inf
  EXPECT_TRUE(std::isnan((*v)[2]));
  EXPECT_EQ(Bits((*v)[3]), 0x00000000u);         // +0
  EXPECT_EQ(Bits((*v)[4]), 0x80000000u);         // -0
  EXPECT_EQ((*v)[5], std::ldexp(1.0f, -24));     // 0x0001
  EXPECT_EQ((*v)[6], std::ldexp(1023.0f, -24));  // 0x03FF
  EXPECT_EQ((*v)[7], std::ldexp(1.0f, -14));     // 0x0400
  std::vector<uint8_t> raw = Raw(*ckpt_, "tricky.f16.1d");
  for (size_t i = 0; i < 64; ++i) {
    uint16_t h = static_cast<uint16_t>(raw[2 * i] | (raw[2 * i + 1] << 8));
    if (std::isnan(F16Reference(h))) continue;
    ASSERT_EQ(Bits((*v)[i]), Bits(F16Reference(h))) << i;
  }
}

TEST(Float16Test, AllF16PatternsMatchReference) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float got = F16ToF32(static_cast<uint16_t>(h));
    float want = F16Reference(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      // The payload and sign survive: the top mantissa bits are h's.
      ASSERT_EQ(Bits(got) >> 13, ((h & 0x8000u) << 3) | 0x3FC00u | (h & 0x3FF))
          << h;
    } else {
      ASSERT_EQ(Bits(got), Bits(want)) << h;
    }
  }
}

TEST_F(StFixtureTest, U8ReadsRawButNotAsFloat) {
  const TensorInfo* t = ckpt_->Find("packed.u8.2d");
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->shape, ElementsAre(7, 32));
  EXPECT_EQ(t->nbytes, 224u);
  std::vector<uint8_t> raw = Raw(*ckpt_, "packed.u8.2d");
  EXPECT_THAT(std::vector<uint8_t>(raw.begin(), raw.begin() + 4),
              ElementsAre(23, 157, 148, 190));
  auto f = ckpt_->ReadF32("packed.u8.2d", -1);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("packed.u8.2d"));
  EXPECT_THAT(f.status().message(), HasSubstr("U8"));
}

TEST_F(StFixtureTest, ScalarEmptyAndHigherRanks) {
  const TensorInfo* s = ckpt_->Find("scalar.f32");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->numel(), 1);
  auto sv = ckpt_->ReadF32("scalar.f32", 1);
  ASSERT_TRUE(sv.ok()) << sv.status();
  EXPECT_THAT(*sv, ElementsAre(3.5f));

  const TensorInfo* e = ckpt_->Find("empty.f32");
  ASSERT_NE(e, nullptr);
  EXPECT_THAT(e->shape, ElementsAre(0, 8));
  EXPECT_EQ(e->numel(), 0);
  EXPECT_EQ(e->nbytes, 0u);
  auto ev = ckpt_->ReadF32("empty.f32", 0);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_TRUE(ev->empty());

  const TensorInfo* r3 = ckpt_->Find("rank3.f32");
  ASSERT_NE(r3, nullptr);
  EXPECT_THAT(r3->shape, ElementsAre(2, 3, 4));
  auto r3v = ckpt_->ReadF32("rank3.f32", 24);
  ASSERT_TRUE(r3v.ok()) << r3v.status();
  EXPECT_FLOAT_EQ((*r3v)[1], 0.51452059f);

  const TensorInfo* r4 = ckpt_->Find("rank4.u8");
  ASSERT_NE(r4, nullptr);
  EXPECT_THAT(r4->shape, ElementsAre(2, 2, 2, 2));
  EXPECT_EQ(Raw(*ckpt_, "rank4.u8").size(), 16u);
}

TEST_F(StFixtureTest, SecondShardAndEscapedName) {
  auto a = ckpt_->ReadF32("second.shard.f32", 100);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FLOAT_EQ((*a)[0], -0.38370088f);
  std::vector<uint8_t> u = Raw(*ckpt_, "second.shard.u8");
  ASSERT_EQ(u.size(), 300u);
  EXPECT_EQ(u[1], 247);
  auto w = ckpt_->ReadF32(kWeird, 3);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_THAT(*w, ElementsAre(1.0f, 2.0f, 3.0f));
  EXPECT_THAT(ckpt_->Find(kWeird)->file, HasSubstr("00002-of-00002"));
}

TEST_F(StFixtureTest, ReadF32ChecksCountAndName) {
  auto v = ckpt_->ReadF32("plain.f32.2d", 255);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("plain.f32.2d"));
  EXPECT_THAT(v.status().message(), HasSubstr("256"));
  EXPECT_THAT(v.status().message(), HasSubstr("255"));
  auto m = ckpt_->ReadF32("no.such.tensor", -1);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("no.such.tensor"));
}

TEST(SafetensorsTest, OpenFileReadsOneShard) {
  auto ckpt = SafetensorsCheckpoint::OpenFile(kShard1);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names().size(), 10u);
  EXPECT_EQ((*ckpt)->Find("second.shard.f32"), nullptr);
}

TEST(SafetensorsTest, TinyCheckpointsOpenThroughIndex) {
  for (const char* name : {"ckpt_A", "ckpt_C"}) {
    SCOPED_TRACE(name);
    const std::string dir = kK3 + name;
    auto ckpt = SafetensorsCheckpoint::OpenDir(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto cfg = LoadK3Config(dir + "/config.json");
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    const int64_t e = cfg->hidden_size;
    auto emb = (*ckpt)->ReadF32("language_model.model.embed_tokens.weight",
                                int64_t{cfg->vocab_size} * e);
    ASSERT_TRUE(emb.ok()) << emb.status();
    auto norm = (*ckpt)->ReadF32("language_model.model.norm.weight", e);
    ASSERT_TRUE(norm.ok()) << norm.status();
    const TensorInfo* w1 = (*ckpt)->Find(
        "language_model.model.layers.1.block_sparse_moe.experts.0.w1."
        "weight_packed");
    ASSERT_NE(w1, nullptr);
    EXPECT_EQ(w1->dtype, DType::kU8);
    EXPECT_THAT(w1->shape, ElementsAre(cfg->moe_intermediate_size,
                                       cfg->routed_expert_hidden_size / 2));
  }
  auto a = SafetensorsCheckpoint::OpenDir(kK3 + "ckpt_A");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->Names().size(), 916u);
}

TEST(SafetensorsTest, ConcurrentReadsShareOneDescriptor) {
  auto ckpt = SafetensorsCheckpoint::OpenDir(kK3 + "ckpt_A");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string name = "language_model.model.embed_tokens.weight";
  auto want = (*ckpt)->ReadF32(name, -1);
  ASSERT_TRUE(want.ok());
  std::vector<std::thread> threads;
  std::vector<int> same(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        auto got = (*ckpt)->ReadF32(name, -1);
        if (!got.ok() || *got != *want) return;
      }
      same[t] = 1;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_THAT(same, ::testing::Each(1));
}

}  // namespace
}  // namespace flotilla::model
