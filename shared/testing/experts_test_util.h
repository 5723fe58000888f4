// Helpers shared by the flotilla_experts tests: paths into the reference
// data pack, the streaming-cache fixture's expected bytes (FORMAT.md 4.4),
// scratch directories, and a TensorSource with hand-made tensor locations.
#ifndef FLOTILLA_SHARED_TESTING_EXPERTS_TEST_UTIL_H_
#define FLOTILLA_SHARED_TESTING_EXPERTS_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::experts::testing {

// Absolute path under tests/fixtures/k3.
std::string K3Path(const std::string& relative);
// tests/fixtures/k3/fixtures/cache/model-00001-of-00001.safetensors
std::string CacheFixturePath();
model::K3Config LoadConfigOrDie(const std::string& path);

// The 1632-byte run of cache-fixture expert `e`: for w = 0, 1, 2 a [8,64]
// packed tensor then a [8,4] scale tensor, byte i of each being
// (i + base) mod 251, base = (977 e + 31 w + (packed ? 0 : 7)) & 255.
std::vector<uint8_t> CacheFixtureRun(int expert);

// A fresh directory under $TEST_TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  // Copies `from` to path()/name and returns the new path.
  std::string CopyIn(const std::string& from, const std::string& name) const;

 private:
  std::string path_;
};

// Reads `length` bytes at `offset` of `path` (test-side reference reads).
std::vector<uint8_t> ReadBytes(const std::string& path, uint64_t offset,
                               uint64_t length);
// Overwrites one byte of `path` at `offset` with its complement.
void FlipByte(const std::string& path, uint64_t offset);

// A TensorSource whose TensorInfos are given directly (no data).
class FakeSource : public model::TensorSource {
 public:
  void Add(const std::string& name, model::DType dtype,
           std::vector<int64_t> shape, const std::string& file,
           uint64_t offset);
  const model::TensorInfo* Find(absl::string_view name) const override;
  std::vector<std::string> Names() const override;
  absl::Status ReadRaw(const model::TensorInfo& info, void* dst) const override;

 private:
  std::map<std::string, model::TensorInfo, std::less<>> infos_;
};

}  // namespace flotilla::experts::testing

#endif  // FLOTILLA_SHARED_TESTING_EXPERTS_TEST_UTIL_H_
