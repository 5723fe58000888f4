#include "coordinator/serve/prefix_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/model/state_codec.h"
#include "coordinator/serve/prefix_cache.h"
#include "shared/io/checksum.h"

namespace flotilla::coordinator::serve {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[] = "FLOTPFX1";
constexpr size_t kMagicSize = 8;
constexpr char kSuffix[] = ".prefix";

// The parts of a file: its fingerprint, ids and state; `check` false reads
// the header only (fingerprint and ids) for the index.
struct Parsed {
  std::string fingerprint;
  std::vector<int32_t> ids;
  std::string state;
};

// The magic, fingerprint and ids at the start of a file, without reading
// its state (indexing a folder of large states reads only these).
absl::StatusOr<std::string> ReadHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string head(kMagicSize + 8, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in) return head;  // Parse reports it
  state_codec::Reader fp(absl::string_view(head).substr(kMagicSize));
  const uint64_t fp_size = *fp.U64();
  if (fp_size > 4096) return head;
  std::string more(fp_size + 8, '\0');
  in.read(more.data(), static_cast<std::streamsize>(more.size()));
  head += more.substr(0, static_cast<size_t>(in.gcount()));
  if (!in) return head;
  state_codec::Reader count(absl::string_view(more).substr(fp_size));
  const uint64_t n = *count.U64();
  if (n > (uint64_t{1} << 24)) return head;
  std::string ids(n * 4, '\0');
  in.read(ids.data(), static_cast<std::streamsize>(ids.size()));
  head += ids.substr(0, static_cast<size_t>(in.gcount()));
  return head;
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<Parsed> Parse(const std::string& bytes, bool check) {
  auto bad = [](const std::string& why) {
    return absl::DataLossError(why);
  };
  if (bytes.size() < kMagicSize + 8 ||
      bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    return bad("not a prefix-cache file");
  }
  if (check) {
    const size_t body = bytes.size() - 8;
    state_codec::Reader tail(absl::string_view(bytes).substr(body));
    absl::StatusOr<uint64_t> sum = tail.U64();
    if (!sum.ok() || *sum != io::Checksum64(bytes.data(), body)) {
      return bad("checksum mismatch");
    }
  }
  state_codec::Reader in(absl::string_view(bytes).substr(kMagicSize));
  Parsed p;
  absl::StatusOr<uint64_t> n = in.U64();
  if (!n.ok() || *n > 4096) return bad("bad fingerprint length");
  const size_t fp_at = kMagicSize + 8;
  if (bytes.size() < fp_at + *n) return bad("cut short");
  p.fingerprint = bytes.substr(fp_at, *n);
  state_codec::Reader rest(absl::string_view(bytes).substr(fp_at + *n));
  absl::StatusOr<uint64_t> count = rest.U64();
  const size_t ids_at = fp_at + *n + 8;
  if (!count.ok() || *count > (bytes.size() - ids_at) / 4) return bad("cut short");
  p.ids.resize(*count);
  std::memcpy(p.ids.data(), bytes.data() + ids_at, *count * 4);
  if (!check) return p;
  const size_t state_at = ids_at + *count * 4;
  state_codec::Reader state(absl::string_view(bytes).substr(state_at));
  absl::StatusOr<uint64_t> state_size = state.U64();
  if (!state_size.ok() || state_at + 8 + *state_size + 8 != bytes.size()) {
    return bad("cut short");
  }
  p.state = bytes.substr(state_at + 8, *state_size);
  return p;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrefixStore>> PrefixStore::Open(
    const std::string& dir, std::string fingerprint, uint64_t budget_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prefix-cache-dir: cannot create or open ", dir,
        ec ? ": " + ec.message() : ""));
  }
  std::unique_ptr<PrefixStore> store(
      new PrefixStore(dir, std::move(fingerprint), budget_bytes));
  store->Index();
  store->Evict();
  return store;
}

void PrefixStore::Index() {
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, Entry>> found;
  // Every std::filesystem call here takes an error_code: the throwing
  // forms end the process on an entry it cannot stat (a symlink loop:
  // ELOOP), which is reported and skipped instead.
  fs::directory_iterator it(dir_, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string path = e.path().string();
    if (!absl::EndsWith(path, kSuffix)) continue;
    std::error_code stat_error;
    const bool regular = e.is_regular_file(stat_error);
    if (stat_error) {
      std::fprintf(stderr, "prefix cache: %s is not used: %s\n", path.c_str(),
                   stat_error.message().c_str());
      continue;
    }
    if (!regular) continue;
    absl::StatusOr<std::string> head = ReadHeader(path);
    absl::StatusOr<Parsed> p =
        head.ok() ? Parse(*head, /*check=*/false) : head.status();
    if (!p.ok()) {
      std::fprintf(stderr, "prefix cache: %s is not used: %s\n", path.c_str(),
                   std::string(p.status().message()).c_str());
      continue;
    }
    if (p->fingerprint != fingerprint_) {
      std::fprintf(stderr,
                   "prefix cache: %s is from another model or build "
                   "(fingerprint %s, this one %s); not used\n",
                   path.c_str(), p->fingerprint.c_str(), fingerprint_.c_str());
      continue;
    }
    std::error_code size_error;
    const uint64_t size = e.file_size(size_error);
    const fs::file_time_type time = e.last_write_time(size_error);
    if (size_error) continue;  // gone since it was read
    found.push_back({time, Entry{path, std::move(p->ids), size, 0}});
  }
  if (ec) {
    std::fprintf(stderr, "prefix cache: listing %s stopped: %s\n", dir_.c_str(),
                 ec.message().c_str());
  }
  // Oldest first: the clock gives later files later use stamps.
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [time, entry] : found) {
    entry.last_used = ++clock_;
    bytes_ += entry.bytes;
    entries_.push_back(std::move(entry));
  }
}

void PrefixStore::Drop(size_t index) {
  std::error_code ec;
  fs::remove(entries_[index].path, ec);
  bytes_ -= entries_[index].bytes;
  entries_.erase(entries_.begin() + index);
}

void PrefixStore::Evict() {
  while (bytes_ > budget_ && !entries_.empty()) {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i) {
      if (entries_[i].last_used < entries_[oldest].last_used) oldest = i;
    }
    Drop(oldest);
  }
}

std::unique_ptr<ModelSequence> PrefixStore::Find(const std::vector<int32_t>& ids,
                                                 size_t longer_than,
                                                 const LanguageModel& model,
                                                 size_t* length) {
  // Files that cannot go back to their share are passed over (by path:
  // Drop reorders the entries).
  std::vector<std::string> passed;
  while (true) {
    int best = -1;
    size_t best_usable = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const size_t usable = UsablePrefix(entries_[i].ids, ids);
      if (usable > longer_than && usable > best_usable &&
          std::find(passed.begin(), passed.end(), entries_[i].path) ==
              passed.end()) {
        best = static_cast<int>(i);
        best_usable = usable;
      }
    }
    if (best < 0) return nullptr;
    Entry& e = entries_[best];
    absl::StatusOr<std::string> bytes = ReadAll(e.path);
    absl::StatusOr<Parsed> p =
        bytes.ok() ? Parse(*bytes, /*check=*/true) : bytes.status();
    absl::StatusOr<std::unique_ptr<ModelSequence>> state =
        !p.ok() ? p.status()
        : p->fingerprint != fingerprint_ || p->ids != e.ids
            ? absl::DataLossError("changed since it was indexed")
            : model.LoadSequence(p->state);
    if (!state.ok()) {
      std::fprintf(stderr, "prefix cache: %s is not used and removed: %s\n",
                   e.path.c_str(), std::string(state.status().message()).c_str());
      Drop(best);
      continue;
    }
    std::unique_ptr<ModelSequence> cut =
        CutTo(*std::move(state), e.ids.size(), best_usable);
    if (cut == nullptr) {
      passed.push_back(e.path);
      continue;
    }
    e.last_used = ++clock_;
    *length = best_usable;
    return cut;
  }
}

void PrefixStore::Put(const std::vector<int32_t>& ids,
                      const ModelSequence& state) {
  std::string bytes(kMagic, kMagicSize);
  state_codec::PutU64(&bytes, fingerprint_.size());
  bytes += fingerprint_;
  state_codec::PutU64(&bytes, ids.size());
  bytes.append(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
  std::string saved;
  if (absl::Status s = state.Save(&saved); !s.ok()) {
    if (!save_refused_) {  // once: every state of this model would say it
      std::fprintf(stderr, "prefix cache: states are not kept on disk: %s\n",
                   std::string(s.message()).c_str());
      save_refused_ = true;
    }
    return;
  }
  state_codec::PutU64(&bytes, saved.size());
  bytes += saved;
  state_codec::PutU64(&bytes, io::Checksum64(bytes.data(), bytes.size()));
  if (bytes.size() > budget_) return;
  const std::string name = io::ChecksumHex(io::Checksum64(ids.data(), ids.size() * 4));
  const std::string path = absl::StrCat(dir_, "/", name, kSuffix);
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.good()) {
      std::fprintf(stderr, "prefix cache: cannot write %s\n", temp.c_str());
      std::error_code ec;
      fs::remove(temp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    std::fprintf(stderr, "prefix cache: cannot rename %s: %s\n", temp.c_str(),
                 ec.message().c_str());
    return;
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].path == path) {
      bytes_ -= entries_[i].bytes;
      entries_.erase(entries_.begin() + i);
      break;
    }
  }
  entries_.push_back(Entry{path, ids, bytes.size(), ++clock_});
  bytes_ += bytes.size();
  Evict();
}

}  // namespace flotilla::coordinator::serve
