#include "shared/model/checkpoint_fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "shared/base/open_file.h"
#include "shared/base/status_macros.h"
#include "shared/io/file.h"
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
  void Bytes(absl::string_view s) {
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

std::string Hex(uint64_t v) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, v);
  return std::string(hex);
}

// Hashes a file's size and bytes, 4 MiB at a time: the K3 index is 58 MB,
// and pack stamps it while holding the parsed checkpoint.
absl::Status HashWholeFile(const std::string& path, Hasher* h) {
  FLOTILLA_ASSIGN_OR_RETURN(io::File file, io::File::OpenRegular(path));
  h->U64(file.size());
  std::string buf(std::min<uint64_t>(file.size(), 4u << 20), '\0');
  for (uint64_t at = 0; at < file.size(); at += buf.size()) {
    const size_t n = std::min<uint64_t>(buf.size(), file.size() - at);
    FLOTILLA_RETURN_IF_ERROR(file.ReadExact(at, buf.data(), n, "bytes"));
    h->Bytes(absl::string_view(buf.data(), n));
  }
  return absl::OkStatus();
}

// A shard's size, its header bytes (the u64 length and the JSON) and where
// its tensor data starts.
struct ShardHeader {
  uint64_t file_size = 0;
  uint64_t data_start = 0;
  std::string header;
};

absl::StatusOr<ShardHeader> ReadShardHeader(const std::string& path,
                                            bool with_bytes = true) {
  FLOTILLA_ASSIGN_OR_RETURN(io::File file, io::File::OpenRegular(path));
  uint8_t len[8];
  if (file.size() < sizeof(len)) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", file.size(), " bytes is not a safetensors file"));
  }
  FLOTILLA_RETURN_IF_ERROR(
      file.ReadExact(0, len, sizeof(len), "header length"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n > file.size() - sizeof(len)) {
    return absl::DataLossError(absl::StrCat(
        path, ": header of ", n, " bytes runs past the file's ", file.size()));
  }
  ShardHeader out;
  out.file_size = file.size();
  out.data_start = sizeof(len) + n;
  if (with_bytes) {
    out.header.resize(n);
    FLOTILLA_RETURN_IF_ERROR(
        file.ReadExact(sizeof(len), out.header.data(), n, "header"));
  }
  return out;
}

// Content, sampled: kSamples blocks of kSampleBytes spread evenly over each
// shard's tensor data (first and last included). Metadata alone cannot
// tell two checkpoints of one layout apart (two synth seeds, a fine-tune);
// a few KiB per shard can, for ~400 small reads on the full K3, issued to
// the kernel together (POSIX_FADV_WILLNEED) and then read in order. Every
// byte the engine computes with is still checked against the pack's
// checksums when it is read; this is what the fingerprint and the stamp
// can afford at each start.
constexpr uint64_t kSampleBytes = 4096;
constexpr int kSamples = 4;

std::vector<std::pair<uint64_t, uint64_t>> SampleRanges(const ShardHeader& s) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (s.file_size <= s.data_start) return out;
  const uint64_t data = s.file_size - s.data_start;
  const uint64_t block = std::min(kSampleBytes, data);
  for (int k = 0; k < kSamples; ++k) {
    out.push_back({s.data_start + (data - block) * k / (kSamples - 1), block});
  }
  return out;
}

absl::Status HashSamples(const std::vector<std::string>& paths,
                         const std::vector<ShardHeader>& shards, Hasher* h) {
  for (size_t i = 0; i < paths.size(); ++i) {
    const absl::StatusOr<int> fd = base::OpenForRead(paths[i]);
    if (!fd.ok()) continue;  // the read below reports it
    for (const auto& [at, n] : SampleRanges(shards[i])) {
      ::posix_fadvise(*fd, static_cast<off_t>(at), static_cast<off_t>(n),
                      POSIX_FADV_WILLNEED);
    }
    ::close(*fd);
  }
  std::string buf(kSampleBytes, '\0');
  for (size_t i = 0; i < paths.size(); ++i) {
    FLOTILLA_ASSIGN_OR_RETURN(io::File file, io::File::OpenRegular(paths[i]));
    for (const auto& [at, n] : SampleRanges(shards[i])) {
      FLOTILLA_RETURN_IF_ERROR(
          file.ReadExact(at, buf.data(), n, "data sample"));
      h->Bytes(absl::string_view(buf.data(), n));
    }
  }
  return absl::OkStatus();
}

// Hashes every shard's header in order. On a cold disk each header is two
// small random reads (~2.4 ms each on the 2-vCPU VM): 94 of them one after
// another were 0.23 s of a 0.6 s open. So the kernel is first asked to read
// every header's first kHeaderAhead bytes at once (POSIX_FADV_WILLNEED
// queues them without waiting), then they are read in order from the page
// cache. (Reader threads did the same but left their malloc arenas behind:
// +24 MB RSS after open.)
constexpr off_t kHeaderAhead = 1 << 20;

absl::Status HashShardHeaders(const std::string& model_dir,
                              const std::vector<std::string>& shards,
                              Hasher* h) {
  for (const std::string& shard : shards) {
    const absl::StatusOr<int> fd = base::OpenForRead(model_dir + "/" + shard);
    if (!fd.ok()) continue;  // the read below reports it
    ::posix_fadvise(*fd, 0, kHeaderAhead, POSIX_FADV_WILLNEED);
    ::close(*fd);
  }
  std::vector<std::string> paths;
  std::vector<ShardHeader> layouts;
  for (const std::string& shard : shards) {
    paths.push_back(model_dir + "/" + shard);
    FLOTILLA_ASSIGN_OR_RETURN(ShardHeader got, ReadShardHeader(paths.back()));
    h->Str(shard);
    h->U64(got.file_size);
    h->Str(got.header);
    // Only where the data is: a header is ~0.6 MB at full K3 scale.
    layouts.push_back({got.file_size, got.data_start, {}});
  }
  h->Str("samples");
  return HashSamples(paths, layouts, h);
}

}  // namespace

absl::StatusOr<std::string> FingerprintCheckpoint(const std::string& model_dir,
                                                  const TensorSource& source) {
  FLOTILLA_ASSIGN_OR_RETURN(
      std::string config, internal::ReadSmallFile(model_dir + "/config.json"));
  Hasher h;
  h.Str("flotilla-checkpoint-fingerprint-v2\n");
  h.Str(config);
  std::map<std::string, std::string> shards;  // relative name -> path
  // Shards in tensor order repeat: their relative names are worked out
  // once per file.
  std::map<std::string, std::string, std::less<>> relative;  // path -> name
  source.ForEachTensor([&](const TensorInfo& t) {
    auto it = relative.find(t.file);
    if (it == relative.end()) {
      it = relative.emplace(t.file, RelativeName(model_dir, t.file)).first;
      shards.emplace(it->second, t.file);
    }
    h.Str(t.name);
    h.Str(DTypeName(t.dtype));
    h.U64(t.shape.size());
    for (int64_t d : t.shape) h.U64(static_cast<uint64_t>(d));
    h.U64(t.nbytes);
    h.Str(it->second);
    h.U64(t.offset);
  });
  for (const auto& [name, path] : shards) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot stat shard ", path, ": ", std::strerror(errno)));
    }
    h.Str(name);
    h.U64(static_cast<uint64_t>(st.st_size));
  }
  std::vector<std::string> paths;
  std::vector<ShardHeader> layouts;
  for (const auto& [name, path] : shards) {
    paths.push_back(path);
    FLOTILLA_ASSIGN_OR_RETURN(ShardHeader got,
                              ReadShardHeader(path, /*with_bytes=*/false));
    layouts.push_back(got);
  }
  h.Str("samples");
  FLOTILLA_RETURN_IF_ERROR(HashSamples(paths, layouts, &h));
  return Hex(h.Digest());
}

std::vector<std::string> CheckpointShards(const std::string& model_dir,
                                          const TensorSource& source) {
  std::set<std::string> files;
  source.ForEachTensor([&](const TensorInfo& t) { files.insert(t.file); });
  std::set<std::string> shards;
  for (const std::string& f : files) shards.insert(RelativeName(model_dir, f));
  return {shards.begin(), shards.end()};
}

absl::StatusOr<std::string> CheckpointStamp(
    const std::string& model_dir, const std::vector<std::string>& shards) {
  namespace fs = std::filesystem;
  FLOTILLA_ASSIGN_OR_RETURN(
      std::string config, internal::ReadSmallFile(model_dir + "/config.json"));
  Hasher h;
  h.Str("flotilla-checkpoint-stamp-v2\n");
  h.Str(config);
  const std::string index = model_dir + "/model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    h.Str("index");
    FLOTILLA_RETURN_IF_ERROR(HashWholeFile(index, &h));
  } else {
    // Without an index the checkpoint is every *.safetensors file here.
    std::set<std::string> listed;
    for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 12 && name.ends_with(".safetensors")) {
        listed.insert(name);
      }
    }
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat(model_dir, ": cannot list directory: ", ec.message()));
    }
    h.Str("listing");
    for (const std::string& name : listed) h.Str(name);
  }
  FLOTILLA_RETURN_IF_ERROR(HashShardHeaders(model_dir, shards, &h));
  return Hex(h.Digest());
}

}  // namespace flotilla::model
