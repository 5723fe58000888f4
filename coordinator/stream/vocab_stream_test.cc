// VocabStream against an in-memory matrix: a streamed lm_head over several
// double-buffered passes gives bit-identical logits, embedding rows match,
// and a damaged chunk is reported by rows, file and offset.
#include "coordinator/stream/vocab_stream.h"

#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "shared/io/checksum.h"
#include "shared/model/float16.h"
#include "shared/testing/io_test_util.h"

namespace flotilla::coordinator {
namespace {

constexpr uint64_t kVocab = 200;  // last chunk (rows 192..199) is short
constexpr uint64_t kHidden = 64;
constexpr uint64_t kChunkRows = 64;
constexpr uint64_t kRowBytes = kHidden * 2;
constexpr uint64_t kRegionOffset = 8192;
constexpr uint64_t kFieldOffset = 100;  // rows do not start 4 KiB-aligned

class VocabStreamTest : public ::testing::TestWithParam<io::ReaderKind> {
 protected:
  void SetUp() override {
    if (GetParam() == io::ReaderKind::kUring) {
      // The pread instance runs the same checks.
      if (absl::Status s = io::testing::UringAvailable(); !s.ok()) {
        GTEST_SKIP() << "io_uring unavailable here: " << s;
      }
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    bits_.resize(kVocab * kHidden);
    for (uint16_t& b : bits_) {
      const float f = dist(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      b = static_cast<uint16_t>(u >> 16);
    }
    region_.kind = "lm_head";
    region_.offset = kRegionOffset;
    region_.size = io::AlignUp(kFieldOffset + kVocab * kRowBytes);
    region_.chunk_rows = kChunkRows;
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(bits_.data());
    for (uint64_t r = 0; r < kVocab; r += kChunkRows) {
      const uint64_t n = std::min(kChunkRows, kVocab - r);
      region_.chunk_checksums.push_back(
          io::Checksum64(bytes + r * kRowBytes, n * kRowBytes));
    }
    path_ = dir_.File("trunk.bin");
    std::vector<char> file(kRegionOffset + region_.size, 0);
    std::memcpy(file.data() + kRegionOffset + kFieldOffset, bits_.data(),
                kVocab * kRowBytes);
    std::ofstream(path_, std::ios::binary).write(file.data(), file.size());
    auto f = io::File::Open(path_, true);
    ASSERT_TRUE(f.ok()) << f.status();
    file_ = std::move(*f);
  }

  absl::StatusOr<std::unique_ptr<VocabStream>> Make(VocabStream::Use use) {
    VocabStreamOptions o;
    o.lm_head_pass_bytes = kChunkRows * kRowBytes;  // 4 passes
    o.reader = GetParam();
    return VocabStream::Create(&file_, &region_, kFieldOffset,
                               kernels::DenseType::kBF16, kVocab, kHidden, use,
                               o);
  }

  void FlipByteOfRow(uint64_t row) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t at = kRegionOffset + kFieldOffset + row * kRowBytes + 3;
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x04));
  }

  io::testing::ScratchDir dir_;
  std::string path_;
  std::vector<uint16_t> bits_;
  pack::PackRegion region_;
  io::File file_;
};

TEST_P(VocabStreamTest, StreamedLmHeadIsBitIdenticalToInMemoryMatMul) {
  auto stream = Make(VocabStream::Use::kLmHead);
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr size_t kTokens = 3;
  std::vector<float> x(kTokens * kHidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * (i % 17) - 0.05f;
  kernels::ThreadPool pool(2);
  kernels::DenseMatrix m{kernels::DenseType::kBF16, bits_.data(), kVocab,
                         kHidden};
  std::vector<float> want(kTokens * kVocab), got(kTokens * kVocab, -1.0f);
  kernels::MatMul(m, x.data(), kTokens, want.data(), &pool);
  // Twice: the second call reuses both pass buffers.
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE((*stream)->LmHead(x.data(), kTokens, got.data(), &pool).ok());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
  }
  // Each pass reads its rows' aligned range once.
  EXPECT_GE((*stream)->bytes_read(), 2 * kVocab * kRowBytes);
  EXPECT_LE((*stream)->bytes_read(), 2 * (kVocab * kRowBytes + 4 * 8192));
}

TEST_P(VocabStreamTest, EmbedRowsMatchTheMatrix) {
  auto stream = Make(VocabStream::Use::kEmbedRows);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<int32_t> ids = {0, 63, 64, 199, 5};
  std::vector<float> out(ids.size() * kHidden);
  ASSERT_TRUE((*stream)->EmbedRows(ids, out.data()).ok());
  for (size_t t = 0; t < ids.size(); ++t) {
    for (uint64_t j = 0; j < kHidden; ++j) {
      ASSERT_EQ(out[t * kHidden + j],
                model::Bf16ToF32(bits_[ids[t] * kHidden + j]))
          << "id " << ids[t] << " col " << j;
    }
  }
  EXPECT_EQ((*stream)->EmbedRows({200}, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*stream)->EmbedRows({-1}, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(VocabStreamTest, DamagedChunkIsReportedByRowsFileAndOffset) {
  FlipByteOfRow(130);  // chunk 2, the third pass
  auto stream = Make(VocabStream::Use::kLmHead);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<float> x(kHidden, 0.5f), logits(kVocab);
  kernels::ThreadPool pool(1);
  for (int call = 0; call < 2; ++call) {  // no stray read after a failure
    const absl::Status s = (*stream)->LmHead(x.data(), 1, logits.data(), &pool);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("lm_head rows 128..191"), std::string::npos)
        << s;
    EXPECT_NE(s.message().find(path_), std::string::npos) << s;
    EXPECT_NE(s.message().find(absl::StrCat(
                  "offset ", kRegionOffset + kFieldOffset + 128 * kRowBytes)),
              std::string::npos)
        << s;
  }
  auto embed = Make(VocabStream::Use::kEmbedRows);
  ASSERT_TRUE(embed.ok());
  std::vector<float> row(kHidden);
  EXPECT_TRUE((*embed)->EmbedRows({3}, row.data()).ok());
  EXPECT_EQ((*embed)->EmbedRows({150}, row.data()).code(),
            absl::StatusCode::kDataLoss);
}

TEST_P(VocabStreamTest, RegionWithoutChunkChecksumsIsRefused) {
  region_.chunk_checksums.pop_back();
  auto stream = Make(VocabStream::Use::kLmHead);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(stream.status().message().find("chunk checksums"),
            std::string::npos);
}

TEST(LmHeadStreamBufferBytesTest, PassesAreWholeChunksAndAtMostTheVocab) {
  VocabStreamOptions o;
  o.lm_head_pass_bytes = 1000;  // less than a chunk: one chunk per pass
  EXPECT_EQ(LmHeadStreamBufferBytes(kVocab, kRowBytes, kChunkRows, o),
            2 * (io::AlignUp(kChunkRows * kRowBytes) + 4096));
  o.lm_head_pass_bytes = 1ull << 30;  // more than the vocab: all of it
  EXPECT_EQ(LmHeadStreamBufferBytes(kVocab, kRowBytes, kChunkRows, o),
            2 * (io::AlignUp(256 * kRowBytes) + 4096));
}

INSTANTIATE_TEST_SUITE_P(Readers, VocabStreamTest,
                         ::testing::Values(io::ReaderKind::kUring,
                                           io::ReaderKind::kPread),
                         [](const auto& info) {
                           return info.param == io::ReaderKind::kUring
                                      ? std::string("uring")
                                      : std::string("pread");
                         });

}  // namespace
}  // namespace flotilla::coordinator
