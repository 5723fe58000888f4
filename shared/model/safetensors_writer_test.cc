// SafetensorsWriter: shards read back bit-exactly through
// SafetensorsCheckpoint, whatever the buffer size, thread count or I/O mode.
#include "shared/model/safetensors_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/model/safetensors.h"

namespace flotilla::model {
namespace {

using ::testing::HasSubstr;

// Names that need JSON escaping: quotes, backslash, a tab, non-ASCII.
const char kQuoted[] = "layer.\"quoted\".weight";
const char kBackslash[] = "back\\slash\tand ü";

// A byte of tensor `id` at `offset`: cheap, and different per tensor.
uint8_t PatternByte(int id, uint64_t offset) {
  uint64_t x =
      (offset + 1) * 0x9E3779B97F4A7C15ull ^ (id * 0xBF58476D1CE4E5B9ull);
  return static_cast<uint8_t>((x >> 29) ^ (x >> 47));
}

struct Recorder {
  std::mutex mu;
  bool crossed_granule = false;
  bool out_of_range = false;
};

std::vector<TensorToWrite> SampleTensors(Recorder* rec) {
  struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Spec> specs = {
      {"a.f32", DType::kF32, {3, 5}},       {kQuoted, DType::kBF16, {7}},
      {"odd.u8", DType::kU8, {3}},  // leaves the next tensor unaligned
      {kBackslash, DType::kF16, {2, 2, 2}}, {"empty", DType::kF32, {0, 4}},
      {"big.u8", DType::kU8, {3, 1000003}},  // spans several granules
      {"tail.bf16", DType::kBF16, {1, 33}},
  };
  std::vector<TensorToWrite> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t bytes = DTypeSize(specs[i].dtype);
    for (int64_t d : specs[i].shape) bytes *= d;
    const int id = static_cast<int>(i);
    out.push_back({specs[i].name, specs[i].dtype, specs[i].shape,
                   [id, bytes, rec](uint64_t off, uint64_t n, uint8_t* dst) {
                     if (off / kFillGranule != (off + n - 1) / kFillGranule ||
                         off + n > bytes || n == 0) {
                       std::lock_guard<std::mutex> l(rec->mu);
                       if (off + n > bytes || n == 0)
                         rec->out_of_range = true;
                       else
                         rec->crossed_granule = true;
                     }
                     for (uint64_t j = 0; j < n; ++j) {
                       dst[j] = PatternByte(id, off + j);
                     }
                   }});
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/st_writer_" + std::to_string(getpid()) + "_" +
         name;
}

absl::Status Write(const std::string& path, const SafetensorsWriterOptions& o,
                   const std::vector<TensorToWrite>& tensors,
                   uint64_t* bytes_written = nullptr) {
  auto writer = SafetensorsWriter::Create(o);
  if (!writer.ok()) return writer.status();
  absl::Status s = (*writer)->WriteShard(path, tensors, {{"format", "pt"}});
  if (bytes_written != nullptr) *bytes_written = (*writer)->bytes_written();
  return s;
}

TEST(SafetensorsWriterTest, RoundTripsBitExactThroughReader) {
  Recorder rec;
  const auto tensors = SampleTensors(&rec);
  const std::string path = TempPath("roundtrip.safetensors");
  SafetensorsWriterOptions o;
  o.threads = 3;
  o.buffer_bytes = 64 << 10;  // many buffers: pieces cut at buffer edges
  o.buffers = 2;
  uint64_t written = 0;
  ASSERT_TRUE(Write(path, o, tensors, &written).ok());
  EXPECT_FALSE(rec.crossed_granule);
  EXPECT_FALSE(rec.out_of_range);

  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->Names().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo* info = (*ckpt)->Find(tensors[i].name);
    ASSERT_NE(info, nullptr) << tensors[i].name;
    EXPECT_EQ(info->dtype, tensors[i].dtype);
    EXPECT_EQ(info->shape, tensors[i].shape);
    std::vector<uint8_t> got(info->nbytes);
    ASSERT_TRUE((*ckpt)->ReadRaw(*info, got.data()).ok());
    for (uint64_t j = 0; j < got.size(); ++j) {
      ASSERT_EQ(got[j], PatternByte(static_cast<int>(i), j))
          << tensors[i].name << " byte " << j;
    }
  }

  const std::string file = ReadAll(path);
  EXPECT_EQ(written, file.size());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(file[8], '{');
  // Data follows the header in list order, back to back.
  auto layout = LayoutShard(tensors, {{"format", "pt"}});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->file_bytes(), file.size());
  EXPECT_EQ((*ckpt)->Find("a.f32")->offset, 8 + n);
  EXPECT_EQ((*ckpt)->Find("big.u8")->offset, 8 + n + layout->begin[5]);
  EXPECT_THAT(file.substr(8, n), HasSubstr("\"__metadata__\""));
  unlink(path.c_str());
}

TEST(SafetensorsWriterTest, BytesIndependentOfThreadsBuffersAndIoMode) {
  Recorder rec;
  const auto tensors = SampleTensors(&rec);
  const std::string a = TempPath("a.safetensors");
  const std::string b = TempPath("b.safetensors");
  SafetensorsWriterOptions oa;
  oa.threads = 2;
  oa.buffer_bytes = 12345;  // rounded up to a block multiple
  oa.direct_io = true;
  SafetensorsWriterOptions ob;
  ob.threads = 1;
  ob.buffer_bytes = 8 << 20;
  ob.buffers = 4;
  ob.direct_io = false;
  ASSERT_TRUE(Write(a, oa, tensors).ok());
  ASSERT_TRUE(Write(b, ob, tensors).ok());
  EXPECT_TRUE(ReadAll(a) == ReadAll(b));
  unlink(a.c_str());
  unlink(b.c_str());
}

// tmpfs refuses O_DIRECT before Linux 6.6 (the writer then goes buffered)
// and accepts it after; either way the shard must come out right.
TEST(SafetensorsWriterTest, WritesToTmpfs) {
  struct stat st;
  if (stat("/dev/shm", &st) != 0) GTEST_SKIP() << "no /dev/shm";
  Recorder rec;
  const auto tensors = SampleTensors(&rec);
  const std::string path =
      "/dev/shm/st_writer_" + std::to_string(getpid()) + ".safetensors";
  auto writer = SafetensorsWriter::Create({});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->WriteShard(path, tensors).ok());
  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  unlink(path.c_str());
}

TEST(SafetensorsWriterTest, RejectsBadTensorLists) {
  auto fill = [](uint64_t, uint64_t n, uint8_t* d) { std::memset(d, 0, n); };
  std::vector<TensorToWrite> dup = {{"x", DType::kU8, {2}, fill},
                                    {"x", DType::kU8, {2}, fill}};
  EXPECT_THAT(LayoutShard(dup).status().message(), HasSubstr("twice"));
  std::vector<TensorToWrite> neg = {{"x", DType::kU8, {-2}, fill}};
  EXPECT_THAT(LayoutShard(neg).status().message(), HasSubstr("negative"));
  std::vector<TensorToWrite> meta = {{"__metadata__", DType::kU8, {1}, fill}};
  EXPECT_FALSE(LayoutShard(meta).ok());

  auto writer = SafetensorsWriter::Create({});
  ASSERT_TRUE(writer.ok());
  std::vector<TensorToWrite> no_fill = {{"x", DType::kU8, {2}, nullptr}};
  const std::string path = TempPath("nofill.safetensors");
  EXPECT_THAT(std::string((*writer)->WriteShard(path, no_fill).message()),
              HasSubstr("no fill"));
  std::vector<TensorToWrite> ok = {{"x", DType::kU8, {2}, fill}};
  absl::Status s = (*writer)->WriteShard("/nonexistent-dir/x.safetensors", ok);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent-dir"));
  // The writer stays usable after a failure.
  EXPECT_TRUE((*writer)->WriteShard(path, ok).ok());
  unlink(path.c_str());
}

}  // namespace
}  // namespace flotilla::model
