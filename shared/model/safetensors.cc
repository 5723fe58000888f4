#include "shared/model/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/io/file.h"
#include "shared/model/safetensors_header.h"
#include "shared/model/safetensors_index.h"

namespace flotilla::model {
namespace {

namespace fs = std::filesystem;

constexpr char kIndexName[] = "model.safetensors.index.json";
constexpr char kSuffix[] = ".safetensors";

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SafetensorsCheckpoint::AddShard(
    const std::string& path) {
  FLOTILLA_ASSIGN_OR_RETURN(io::File file, io::File::OpenRegular(path));
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<TensorInfo> infos,
                            internal::ReadSafetensorsHeader(file));
  if (files_.count(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": shard opened twice"));
  }
  files_.emplace(path, std::make_shared<const io::File>(std::move(file)));
  std::vector<std::string> names;
  names.reserve(infos.size());
  for (TensorInfo& info : infos) {
    names.push_back(info.name);
    auto [it, inserted] = tensors_.insert(std::move(info));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", names.back(),
                                                     "' appears in both ",
                                                     it->file, " and ", path));
    }
  }
  return names;
}

absl::Status SafetensorsCheckpoint::LoadIndex(const std::string& dir,
                                              const std::string& index) {
  // shard file -> tensor names the index places there.
  FLOTILLA_ASSIGN_OR_RETURN(auto by_shard, internal::ReadIndexWeightMap(index));
  for (auto& [shard, expected] : by_shard) {
    const std::string path = JoinPath(dir, shard);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      const std::string more =
          expected.size() > 1
              ? absl::StrCat(" and ", expected.size() - 1, " more")
              : std::string();
      return absl::NotFoundError(absl::StrCat(
          index, " names shard ", shard, " (for tensor '", expected.front(),
          "'", more, "), but ", path, " does not exist"));
    }
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<std::string> names, AddShard(path));
    std::sort(names.begin(), names.end());
    for (const std::string& name : expected) {
      if (!std::binary_search(names.begin(), names.end(), name)) {
        auto elsewhere = tensors_.find(name);
        return absl::NotFoundError(absl::StrCat(
            index, " maps tensor '", name, "' to ", shard,
            ", but that shard does not contain it",
            elsewhere == tensors_.end()
                ? std::string()
                : absl::StrCat(" (it is in ", elsewhere->file, ")")));
      }
    }
    // And the other way: a tensor the index leaves out is a checkpoint the
    // index and its shards disagree on (the upstream loaders would not
    // read it), not a tensor to pick up in silence.
    std::vector<absl::string_view> mapped(expected.begin(), expected.end());
    std::sort(mapped.begin(), mapped.end());
    for (const std::string& name : names) {
      if (!std::binary_search(mapped.begin(), mapped.end(),
                              absl::string_view(name))) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " holds tensor '", name, "', which ", index,
                         " does not name (weight_map leaves it out)"));
      }
    }
    // Checked: the names live on as the tensors' keys.
    std::vector<std::string>().swap(expected);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>>
SafetensorsCheckpoint::OpenFile(const std::string& path) {
  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint());
  FLOTILLA_RETURN_IF_ERROR(ckpt->AddShard(path).status());
  return ckpt;
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>>
SafetensorsCheckpoint::OpenDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": not a directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  std::unique_ptr<SafetensorsCheckpoint> ckpt(new SafetensorsCheckpoint());
  const std::string index = JoinPath(dir, kIndexName);
  if (fs::exists(index, ec)) {
    FLOTILLA_RETURN_IF_ERROR(ckpt->LoadIndex(dir, index));
    return ckpt;
  }
  // No index: every *.safetensors file, as kimi-k3-in-c does. Sorted so
  // duplicate-name errors are reproducible.
  std::vector<std::string> shards;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > sizeof(kSuffix) - 1 &&
        name.compare(name.size() - (sizeof(kSuffix) - 1), std::string::npos,
                     kSuffix) == 0) {
      shards.push_back(it->path().string());
    }
  }
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat(dir, ": cannot list directory: ", ec.message()));
  }
  if (shards.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no ", kIndexName, " and no *", kSuffix, " files"));
  }
  std::sort(shards.begin(), shards.end());
  for (const std::string& shard : shards) {
    FLOTILLA_RETURN_IF_ERROR(ckpt->AddShard(shard).status());
  }
  return ckpt;
}

const TensorInfo* SafetensorsCheckpoint::Find(absl::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &*it;
}

void SafetensorsCheckpoint::ForEachTensor(
    const std::function<void(const TensorInfo&)>& fn) const {
  for (const TensorInfo& t : tensors_) fn(t);
}

std::vector<std::string> SafetensorsCheckpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const TensorInfo& info : tensors_) names.push_back(info.name);
  return names;
}

absl::Status SafetensorsCheckpoint::ReadRaw(const TensorInfo& info,
                                            void* dst) const {
  if (info.derived) {
    // Its bytes are not at info.offset: only its view can read it.
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", info.name, "' is a view's per-expert tensor, not one of ",
        info.file, "'s; read it through the view that listed it"));
  }
  auto it = files_.find(info.file);
  if (it == files_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", info.name, "': file ", info.file,
                     " is not part of this checkpoint"));
  }
  if (info.nbytes == 0) return absl::OkStatus();
  return it->second->ReadExact(info.offset, dst, info.nbytes,
                               absl::StrCat("tensor '", info.name, "'"));
}

absl::Status SafetensorsCheckpoint::ReadRange(const TensorInfo& info,
                                              uint64_t begin, uint64_t n,
                                              void* dst) const {
  if (begin > info.nbytes || n > info.nbytes - begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", info.name, "': bytes [", begin, ", +", n,
                     ") are outside its ", info.nbytes, " bytes"));
  }
  TensorInfo range = info;
  range.offset = info.offset + begin;
  range.nbytes = n;
  return ReadRaw(range, dst);
}

}  // namespace flotilla::model
