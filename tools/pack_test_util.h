// Helpers shared by the pack tests: scratch dirs, whole-file I/O, byte
// flips, and a checkpoint whose experts are not contiguous.
#ifndef FLOTILLA_TOOLS_PACK_TEST_UTIL_H_
#define FLOTILLA_TOOLS_PACK_TEST_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/model/safetensors.h"
#include "tools/pack.h"

namespace flotilla::tools::testing {

inline const std::string kCkptA =
    std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";
inline const std::string kCkptC =
    std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_C";

// A fresh directory under the test temp dir, removed by the destructor.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(::testing::TempDir() + "/flotilla_" + name + "_" +
              std::to_string(::getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const {
    return path_ + "/" + name;
  }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

inline void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

inline PackOptions QuietOptions(const std::string& model,
                                const std::string& out) {
  PackOptions o;
  o.model_dir = model;
  o.out_dir = out;
  o.progress = nullptr;
  return o;
}

// Copies ckpt_A's config and tensors into `dir`, rewriting the shard so
// every expert's six tensors are scattered: tensors are ordered by their
// name's last two components (all w1.weight_packed first, ...), which
// interleaves the experts.
inline void WriteScatteredCheckpoint(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kCkptA + "/config.json", dir + "/config.json");
  auto ckpt = model::SafetensorsCheckpoint::OpenDir(kCkptA);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<std::string> names = (*ckpt)->Names();
  auto key = [](const std::string& n) {
    const size_t b = n.rfind('.', n.rfind('.') - 1);
    return n.substr(b) + n;
  };
  std::sort(names.begin(), names.end(),
            [&](const std::string& a, const std::string& b) {
              return key(a) < key(b);
            });
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const std::string& n : names) {
    const model::TensorInfo* t = (*ckpt)->Find(n);
    std::string bytes(t->nbytes, '\0');
    ASSERT_TRUE((*ckpt)->ReadRaw(*t, bytes.data()).ok());
    header[n] = {{"dtype", model::DTypeName(t->dtype)},
                 {"shape", t->shape},
                 {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>(h.size() >> (8 * i));
  WriteAll(dir + "/model.safetensors", file + h + data);
}

}  // namespace flotilla::tools::testing

#endif  // FLOTILLA_TOOLS_PACK_TEST_UTIL_H_
