#include "shared/testing/experts_test_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace flotilla::experts::testing {

std::string K3Path(const std::string& relative) {
  return absl::StrCat(FLOTILLA_TEST_DATA_DIR, "/k3/", relative);
}

std::string CacheFixturePath() {
  return K3Path("fixtures/cache/model-00001-of-00001.safetensors");
}

model::K3Config LoadConfigOrDie(const std::string& path) {
  auto config = model::LoadK3Config(path);
  if (!config.ok()) {
    ADD_FAILURE() << config.status();
    std::abort();
  }
  return *config;
}

std::vector<uint8_t> CacheFixtureRun(int expert) {
  std::vector<uint8_t> run;
  for (int w = 0; w < 3; ++w) {
    for (int packed = 1; packed >= 0; --packed) {
      const int base = (977 * expert + 31 * w + (packed ? 0 : 7)) & 255;
      const int n = packed ? 8 * 64 : 8 * 4;
      for (int i = 0; i < n; ++i) run.push_back((i + base) % 251);
    }
  }
  return run;
}

TempDir::TempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string pattern =
      absl::StrCat(root != nullptr ? root : "/tmp", "/flotilla_experts_XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << pattern;
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::CopyIn(const std::string& from,
                            const std::string& name) const {
  const std::string to = path_ + "/" + name;
  std::filesystem::copy_file(from, to,
                             std::filesystem::copy_options::overwrite_existing);
  return to;
}

std::vector<uint8_t> ReadBytes(const std::string& path, uint64_t offset,
                               uint64_t length) {
  std::vector<uint8_t> out(length);
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(out.data()),
          static_cast<std::streamsize>(length));
  EXPECT_TRUE(in.good()) << "reading " << path << " at " << offset;
  return out;
}

void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(~c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << "flipping byte " << offset << " of " << path;
}

void FakeSource::Add(const std::string& name, model::DType dtype,
                     std::vector<int64_t> shape, const std::string& file,
                     uint64_t offset) {
  model::TensorInfo info;
  info.name = name;
  info.dtype = dtype;
  info.shape = std::move(shape);
  info.file = file;
  info.offset = offset;
  info.nbytes = info.numel() * model::DTypeSize(dtype);
  infos_[name] = info;
}

const model::TensorInfo* FakeSource::Find(absl::string_view name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

std::vector<std::string> FakeSource::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, info] : infos_) names.push_back(name);
  return names;
}

absl::Status FakeSource::ReadRaw(const model::TensorInfo& info,
                                 void* dst) const {
  return absl::UnimplementedError("FakeSource has no data");
}

}  // namespace flotilla::experts::testing
