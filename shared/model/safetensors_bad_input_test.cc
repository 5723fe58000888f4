// Malformed checkpoints, written by the tests into a temporary directory:
// each must give a non-OK status whose message names the file (and the
// tensor where there is one), never a crash or a huge allocation.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/safetensors.h"

namespace flotilla::model {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/st_bad_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : written_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string WriteBytes(const std::string& name, const std::string& bytes) {
    const std::string path = Path(name);
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    if (f == nullptr) return path;
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    written_.push_back(path);
    return path;
  }

  // A safetensors file with the given header text and data bytes; the
  // length prefix is `header_len` when given, else the true length.
  std::string WriteShard(const std::string& name, const std::string& header,
                         const std::string& data, int64_t header_len = -1) {
    uint64_t n =
        header_len >= 0 ? static_cast<uint64_t>(header_len) : header.size();
    std::string bytes;
    for (int i = 0; i < 8; ++i)
      bytes.push_back(static_cast<char>(n >> (8 * i)));
    return WriteBytes(name, bytes + header + data);
  }

  // One valid F32 tensor "a" of shape [4] (16 bytes).
  std::string WriteGoodShard(const std::string& name,
                             const std::string& tensor = "a") {
    return WriteShard(name,
                      absl::StrCat("{\"", tensor,
                                   "\":{\"dtype\":\"F32\",\"shape\":[4],"
                                   "\"data_offsets\":[0,16]}}"),
                      std::string(16, '\0'));
  }

  // Opens `path` (file) and expects failure naming every string in `want`.
  void ExpectFileError(const std::string& path,
                       const std::vector<std::string>& want) {
    auto ckpt = SafetensorsCheckpoint::OpenFile(path);
    ASSERT_FALSE(ckpt.ok()) << path;
    for (const std::string& w : want) {
      EXPECT_THAT(ckpt.status().message(), HasSubstr(w));
    }
  }

  std::string dir_;
  std::vector<std::string> written_;
};

std::string Entry(const std::string& name, const std::string& dtype,
                  const std::string& shape, const std::string& offsets) {
  // StrCat, not operator+: GCC 12 warns (-Wrestrict) on long + chains.
  return absl::StrCat("\"", name, "\":{\"dtype\":\"", dtype,
                      "\",\"shape\":", shape, ",\"data_offsets\":", offsets,
                      "}");
}

std::string Header(std::initializer_list<std::string> entries) {
  return absl::StrCat("{", absl::StrJoin(entries, ","), "}");
}

// A FIFO named like a shard, an index or config.json would block open(2)
// until a writer appears; it is refused at once instead, named as a FIFO.
TEST_F(BadInputTest, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = Path("model.safetensors");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  written_.push_back(fifo);
  ExpectFileError(fifo, {fifo, "not a regular file (a FIFO)"});
  // Found through the directory listing too.
  auto dir = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("a FIFO"));
  // As the index.
  WriteGoodShard("real.safetensors");
  const std::string index = Path("model.safetensors.index.json");
  ASSERT_EQ(mkfifo(index.c_str(), 0600), 0);
  written_.push_back(index);
  dir = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr(index), HasSubstr("a FIFO")));
  // As config.json.
  const std::string config = Path("config.json");
  ASSERT_EQ(mkfifo(config.c_str(), 0600), 0);
  written_.push_back(config);
  auto c = LoadK3Config(config);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("a FIFO"));
}

TEST_F(BadInputTest, TruncatedShardNamesFileAndTensor) {
  const std::string header =
      Header({Entry("w.first", "F32", "[4]", "[0,16]"),
              Entry("w.last", "BF16", "[8]", "[16,32]")});
  const std::string path =
      WriteShard("t.safetensors", header, std::string(20, '\1'));  // 12 missing
  ExpectFileError(path, {path, "w.last", "truncated"});
}

TEST_F(BadInputTest, OffsetsPastEndOfFile) {
  const std::string path = WriteShard(
      "p.safetensors", Header({Entry("big", "F32", "[1024]", "[0,4096]")}),
      std::string(16, '\0'));
  ExpectFileError(path, {path, "big", "4096"});
}

TEST_F(BadInputTest, HeaderLengthBeyondFileOrAbsurd) {
  const std::string header = Header({Entry("a", "F32", "[4]", "[0,16]")});
  std::string path = WriteShard("l.safetensors", header, std::string(16, 0),
                                /*header_len=*/1000000);
  ExpectFileError(path, {path, "header length 1000000"});
  path = WriteShard("huge.safetensors", header, std::string(16, 0),
                    /*header_len=*/INT64_MAX);
  ExpectFileError(path, {path, "header length"});
  path = WriteBytes("tiny.safetensors", "abc");
  ExpectFileError(path, {path, "too small"});
}

TEST_F(BadInputTest, ByteCountMustMatchDtypeAndShape) {
  const std::string path = WriteShard(
      "b.safetensors", Header({Entry("w", "BF16", "[4,2]", "[0,12]")}),
      std::string(12, 0));
  ExpectFileError(path, {path, "'w'", "12 bytes", "needs 16"});
}

TEST_F(BadInputTest, UnknownDtypeNamesTensorAndDtype) {
  const std::string path = WriteShard(
      "d.safetensors", Header({Entry("w.q", "F8_E5M2", "[4]", "[0,4]")}),
      std::string(4, 0));
  ExpectFileError(path, {path, "w.q", "F8_E5M2"});
}

TEST_F(BadInputTest, GarbageHeaderJson) {
  const std::string path = WriteShard(
      "g.safetensors", "{\"a\": {\"dtype\": oops", std::string(8, 0));
  ExpectFileError(path, {path, "invalid JSON"});
  const std::string arr = WriteShard("arr.safetensors", "[1,2]", "");
  ExpectFileError(arr, {arr, "not an object"});
  // One tensor name twice: refused, not the last one taken.
  const std::string twice =
      WriteShard("twice.safetensors",
                 Header({Entry("a", "F32", "[2]", "[0,8]"),
                         Entry("a", "F32", "[2]", "[8,16]")}),
                 std::string(16, 0));
  ExpectFileError(twice, {twice, "duplicate key \"a\""});
}

TEST_F(BadInputTest, MalformedEntries) {
  const struct {
    std::string entry;
    std::string detail;
  } cases[] = {
      {"\"x\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"\"x\":{\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,16]}",
       "shape"},
      {Entry("x", "F32", "[-4]", "[0,16]"), "negative"},
      {Entry("x", "F32", "[4.5]", "[0,16]"), "non-integer"},
      {Entry("x", "F32", "[4]", "[0,8,16]"), "data_offsets"},
      {Entry("x", "F32", "[4]", "[16,0]"), "ends before"},
      {Entry("x", "F32", "[4]", "[-16,0]"), "data_offsets"},
      {Entry("x", "U8", "[4611686018427387904,4611686018427387904]", "[0,0]"),
       "overflows"},
      {Entry("x", "F32", "[4611686018427387904]", "[0,0]"), "overflows"},
      {"\"x\":{\"dtype\":\"F32\",\"shape\":[4]}", "data_offsets"},
      {"\"x\":[1,2]", "not an object"},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.entry);
    const std::string path = WriteShard(absl::StrCat("m", i++, ".safetensors"),
                                        Header({c.entry}), std::string(16, 0));
    ExpectFileError(path, {path, "'x'", c.detail});
  }
}

TEST_F(BadInputTest, OverlappingTensors) {
  const std::string path =
      WriteShard("o.safetensors",
                 Header({Entry("a", "F32", "[4]", "[0,16]"),
                         Entry("b", "F32", "[2]", "[8,16]")}),
                 std::string(16, 0));
  ExpectFileError(path, {path, "'a'", "'b'", "overlap"});
}

// The tensors must tile the data section exactly, as the reference
// implementation requires: a header length one byte short (its padding
// hides it: the JSON still parses) would otherwise shift every tensor by a
// byte; appended bytes and gaps are refused too.
TEST_F(BadInputTest, TensorsMustTileTheDataSection) {
  const std::string header = Header(
      {Entry("a", "F32", "[2]", "[0,8]"), Entry("b", "F32", "[2]", "[8,16]")});
  const std::string padded = header + std::string(8 - header.size() % 8, ' ');
  const std::string data(16, '\x3f');
  ASSERT_TRUE(SafetensorsCheckpoint::OpenFile(
                  WriteShard("ok.safetensors", padded, data))
                  .ok());
  std::string path = WriteShard("short.safetensors", padded, data,
                                static_cast<int64_t>(padded.size()) - 1);
  ExpectFileError(path, {path, "cover 16 bytes of the 17-byte data section",
                         "header does not describe the data"});
  path = WriteShard("tail.safetensors", header, data + "xyz");
  ExpectFileError(path, {path, "cover 16 bytes of the 19-byte data section"});
  path = WriteShard("gap.safetensors",
                    Header({Entry("a", "F32", "[2]", "[0,8]"),
                            Entry("b", "F32", "[2]", "[12,20]")}),
                    std::string(20, 0));
  ExpectFileError(
      path, {path, "'b' starts at data offset 12", "4 unaccounted bytes"});
  path = WriteShard("late.safetensors",
                    Header({Entry("a", "F32", "[2]", "[4,12]")}),
                    std::string(12, 0));
  ExpectFileError(path, {path, "'a' starts at data offset 4"});
}

TEST_F(BadInputTest, MetadataAndNamesAreChecked) {
  const std::string tensor = Entry("a", "F32", "[4]", "[0,16]");
  std::string path =
      WriteShard("meta_ok.safetensors",
                 Header({"\"__metadata__\":{\"format\":\"pt\"}", tensor}),
                 std::string(16, 0));
  EXPECT_TRUE(SafetensorsCheckpoint::OpenFile(path).ok());
  path =
      WriteShard("meta_arr.safetensors",
                 Header({"\"__metadata__\":[1]", tensor}), std::string(16, 0));
  ExpectFileError(path, {path, "__metadata__ is a JSON array"});
  path = WriteShard("meta_num.safetensors",
                    Header({"\"__metadata__\":{\"format\":7}", tensor}),
                    std::string(16, 0));
  ExpectFileError(path, {path, "__metadata__ 'format' is a JSON number"});
  path = WriteShard("nul.safetensors",
                    Header({Entry("a\\u0000b", "F32", "[4]", "[0,16]")}),
                    std::string(16, 0));
  ExpectFileError(path, {path, "tensor name 'a\\000b'", "NUL"});
  path = WriteShard("empty.safetensors",
                    Header({Entry("", "F32", "[4]", "[0,16]")}),
                    std::string(16, 0));
  ExpectFileError(path, {path, "tensor name ''"});
}

TEST_F(BadInputTest, IndexMapsTensorAbsentFromShard) {
  WriteGoodShard("s1.safetensors", "a");
  const std::string index = WriteBytes(
      "model.safetensors.index.json",
      R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(), AllOf(HasSubstr(index), HasSubstr("'b'"),
                                             HasSubstr("s1.safetensors")));
}

TEST_F(BadInputTest, IndexNamesMissingShard) {
  WriteGoodShard("s1.safetensors", "a");
  WriteBytes("model.safetensors.index.json",
             R"({"weight_map": {"a": "s1.safetensors",
                                "b": "gone-00002.safetensors"}})");
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(),
              AllOf(HasSubstr("gone-00002.safetensors"), HasSubstr("'b'")));
}

TEST_F(BadInputTest, BadIndexFiles) {
  WriteGoodShard("s1.safetensors", "a");
  const std::string index = Path("model.safetensors.index.json");
  for (const char* text :
       {"{not json", "[]", R"({"metadata": {}})", R"({"weight_map": {}})",
        R"({"weight_map": {"a": 3}})",
        R"({"weight_map": {"a": "../s1.safetensors"}})",
        R"({"weight_map": {"a": "/etc/passwd"}})"}) {
    SCOPED_TRACE(text);
    WriteBytes("model.safetensors.index.json", text);
    auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
    ASSERT_FALSE(ckpt.ok());
    EXPECT_THAT(ckpt.status().message(), HasSubstr(index));
  }
  // The index is read without a DOM (safetensors_index.h): each shape of
  // bad weight_map still gets its own reason.
  const std::pair<const char*, const char*> reasons[] = {
      {R"({"weight_map": {"a": "s1.safetensors")", "invalid JSON"},
      {R"("just a string")", "not a JSON object"},
      {R"({"weight_map": []})", "missing weight_map object"},
      {R"({"metadata": {"weight_map": {"a": "s1.safetensors"}}})",
       "missing weight_map object"},
      {R"({"weight_map": {}})", "weight_map is empty"},
      {R"({"weight_map": {"a": {"file": "s1.safetensors"}}})",
       "entry for 'a' is not a file name string"},
      {R"({"weight_map": {"a": ["s1.safetensors"]}})",
       "entry for 'a' is not a file name string"},
      {R"({"weight_map": {"a": null}})",
       "entry for 'a' is not a file name string"},
      {R"({"weight_map": {"a": "../s1.safetensors"}})",
       "unusable shard path '../s1.safetensors'"},
      // A tensor named twice, in one shard or in two: not the last taken.
      {R"({"weight_map": {"a": "s1.safetensors", "a": "s1.safetensors"}})",
       "names tensor 'a' twice"},
      {R"({"weight_map": {"a": "s1.safetensors", "a": "s2.safetensors"}})",
       "names tensor 'a' twice"},
      {R"({"weight_map": {"a": "s1.safetensors"},
           "weight_map": {"a": "s1.safetensors"}})",
       "weight_map appears twice"},
      // A NUL cut the shard name short; now it is named.
      {R"({"weight_map": {"a": "s1.safetensors\u0000x"}})",
       "'s1.safetensors\\000x' holds a NUL byte"},
  };
  for (const auto& [text, reason] : reasons) {
    SCOPED_TRACE(text);
    WriteBytes("model.safetensors.index.json", text);
    auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
    ASSERT_FALSE(ckpt.ok());
    EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ckpt.status().message(),
                AllOf(HasSubstr(index), HasSubstr(reason)));
  }
  // Skipped keys are still not nested without bound.
  WriteBytes(
      "model.safetensors.index.json",
      absl::StrCat(R"({"weight_map": {"a": "s1.safetensors"}, "x": )",
                   std::string(100000, '['), std::string(100000, ']'), "}"));
  auto deep = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), HasSubstr("nested deeper than 64"));
  // Other keys, before and after, are skipped.
  WriteBytes("model.safetensors.index.json",
             R"({"metadata": {"total_size": 64, "x": [1, {"y": null}]},
                 "weight_map": {"a": "s1.safetensors"}, "z": true})");
  EXPECT_TRUE(SafetensorsCheckpoint::OpenDir(dir_).ok());
}

TEST_F(BadInputTest, DuplicateNamesAcrossShardsWithoutIndex) {
  const std::string s1 = WriteGoodShard("x-1.safetensors", "dup");
  const std::string s2 = WriteGoodShard("x-2.safetensors", "dup");
  auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_THAT(ckpt.status().message(),
              AllOf(HasSubstr("'dup'"), HasSubstr(s1), HasSubstr(s2)));
}

TEST_F(BadInputTest, DirectoryProblems) {
  auto empty = SafetensorsCheckpoint::OpenDir(dir_);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr(dir_));
  auto missing = SafetensorsCheckpoint::OpenDir(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(dir_ + "/nope"));
  auto file = SafetensorsCheckpoint::OpenFile(dir_ + "/nope.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("nope.safetensors"));
}

TEST_F(BadInputTest, ReadRawRejectsForeignOrOutOfRangeInfo) {
  const std::string path = WriteGoodShard("r.safetensors", "a");
  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  TensorInfo info = *(*ckpt)->Find("a");
  std::vector<char> buf(64);
  info.offset = 1 << 20;
  absl::Status s = (*ckpt)->ReadRaw(info, buf.data());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(path), HasSubstr("'a'"), HasSubstr("1048576")));
  info.file = Path("other.safetensors");
  EXPECT_FALSE((*ckpt)->ReadRaw(info, buf.data()).ok());
}

TEST_F(BadInputTest, FileShrinkingAfterOpenIsAnError) {
  const std::string path = WriteGoodShard("shrink.safetensors", "a");
  auto ckpt = SafetensorsCheckpoint::OpenFile(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_EQ(truncate(path.c_str(), 20), 0);
  auto v = (*ckpt)->ReadF32("a", 4);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(),
              AllOf(HasSubstr(path), HasSubstr("'a'"), HasSubstr("offset")));
}

TEST_F(BadInputTest, GarbageConfigFileNamesFile) {
  const std::string path = WriteBytes("config.json", "{\"hidden_size\": }");
  auto c = LoadK3Config(path);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr(path), HasSubstr("line")));
}

}  // namespace
}  // namespace flotilla::model
