#include "shared/model/checkpoint_fingerprint.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::model {
namespace {

class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void U64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    XXH3_64bits_update(state_, b, sizeof(b));
  }
  void Str(absl::string_view s) {
    U64(s.size());
    XXH3_64bits_update(state_, s.data(), s.size());
  }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

// The shard's name as the manifest records it: relative to the model dir.
std::string RelativeName(const std::string& model_dir,
                         const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path(file).lexically_normal().lexically_relative(
      fs::path(model_dir).lexically_normal());
  if (rel.empty() || *rel.begin() == "..") {
    return fs::path(file).filename().string();
  }
  return rel.string();
}

}  // namespace

absl::StatusOr<std::string> FingerprintCheckpoint(const std::string& model_dir,
                                                  const TensorSource& source) {
  FLOTILLA_ASSIGN_OR_RETURN(
      std::string config, internal::ReadSmallFile(model_dir + "/config.json"));
  Hasher h;
  h.Str("flotilla-checkpoint-fingerprint-v1\n");
  h.Str(config);
  std::map<std::string, std::string> shards;  // relative name -> path
  for (const std::string& name : source.Names()) {
    const TensorInfo* t = source.Find(name);
    if (t == nullptr) continue;
    const std::string shard = RelativeName(model_dir, t->file);
    shards.emplace(shard, t->file);
    h.Str(name);
    h.Str(DTypeName(t->dtype));
    h.U64(t->shape.size());
    for (int64_t d : t->shape) h.U64(static_cast<uint64_t>(d));
    h.U64(t->nbytes);
    h.Str(shard);
    h.U64(t->offset);
  }
  for (const auto& [name, path] : shards) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot stat shard ", path, ": ", std::strerror(errno)));
    }
    h.Str(name);
    h.U64(static_cast<uint64_t>(st.st_size));
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, h.Digest());
  return std::string(hex);
}

}  // namespace flotilla::model
