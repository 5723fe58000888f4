// The prefix cache on disk (--prefix-cache-dir): the state at the end of
// each request, kept as one file per token sequence so that a
// conversation's next turn resumes from it even after a restart, and
// prefills only its new tokens.
//
// A file holds a magic, the model's fingerprint (the checkpoint's, the
// family and the build), the token ids, the state (ModelSequence::Save)
// and an XXH3-64 checksum of all of it. Files of another fingerprint, with
// a wrong checksum or cut short are never used: they are reported on
// stderr and left alone (another model's cache may share the folder) or,
// when corrupt, removed. Least recently used files go first once the
// folder passes its byte budget. Writes go to a temporary name and are
// renamed into place, so a crash never leaves a half file under a real
// name.
//
// Thread-compatibility: used by the generation loop's thread only.
#ifndef FLOTILLA_COORDINATOR_SERVE_PREFIX_STORE_H_
#define FLOTILLA_COORDINATOR_SERVE_PREFIX_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/language_model.h"

namespace flotilla::coordinator::serve {

class PrefixStore {
 public:
  // Opens (creating) `dir` and indexes its files. Errors name the folder.
  static absl::StatusOr<std::unique_ptr<PrefixStore>> Open(
      const std::string& dir, std::string fingerprint, uint64_t budget_bytes);

  // The longest kept state whose ids are a proper prefix of `ids` and
  // longer than `longer_than` ids (what the caller has in memory already),
  // read back through `model`; `*length` receives how many ids it holds.
  // Null when none fits (a file that fails its checks is dropped and the
  // next longest tried).
  std::unique_ptr<ModelSequence> Find(const std::vector<int32_t>& ids,
                                      size_t longer_than,
                                      const LanguageModel& model,
                                      size_t* length);
  // Keeps `state`, which holds exactly `ids`. A state that cannot be saved
  // or written is reported and skipped: the cache is an optimisation.
  void Put(const std::vector<int32_t>& ids, const ModelSequence& state);

  uint64_t bytes() const { return bytes_; }
  size_t files() const { return entries_.size(); }

 private:
  struct Entry {
    std::string path;
    std::vector<int32_t> ids;
    uint64_t bytes = 0;
    uint64_t last_used = 0;
  };
  PrefixStore(std::string dir, std::string fingerprint, uint64_t budget)
      : dir_(std::move(dir)), fingerprint_(std::move(fingerprint)),
        budget_(budget) {}
  void Index();
  void Evict();
  void Drop(size_t index);

  const std::string dir_, fingerprint_;
  const uint64_t budget_;
  std::vector<Entry> entries_;
  uint64_t bytes_ = 0, clock_ = 0;
  bool save_refused_ = false;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_PREFIX_STORE_H_
