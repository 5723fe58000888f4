// A BatchReader that injects faults into the reads of a real one, for
// tests of what the engine does when the disk misbehaves: EIO, a short
// read the reader did not notice, a slow read, a flipped byte. Installed
// through io::ReaderFactory (EngineOptions::reader_factory and the option
// structs below it), so production code paths run unchanged.
//
// Thread-safe: the trunk's reader thread, the vocab stream and the expert
// fetcher each own a reader made by the same factory, and all of them
// consult the one FaultPlan.
#ifndef FLOTILLA_SHARED_TESTING_FAULTY_READER_H_
#define FLOTILLA_SHARED_TESTING_FAULTY_READER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "shared/io/batch_reader.h"

namespace flotilla::testutil {

enum class FaultKind {
  kNone,
  kEio,        // the read fails with EIO, naming file and offset
  kShortRead,  // only the first half of the bytes lands; reported OK
  kSlow,       // the read completes correctly, `slow_ms` late
  kFlipByte,   // the read completes with one byte complemented
};

struct Fault {
  FaultKind kind = FaultKind::kNone;
  // Only reads of files whose path contains this ("" = every file).
  std::string path_contains;
  // Matching reads passed through untouched before the fault hits.
  int64_t skip = 0;
  // How many matching reads it then hits (-1: all of them).
  int64_t count = 1;
  int slow_ms = 50;
};

// What the faulty readers do; shared by every reader of one factory.
class FaultPlan {
 public:
  void Set(const Fault& fault);
  void Clear() { Set(Fault()); }
  // Reads the current fault has hit.
  int64_t hits() const;
  // Matching reads seen since the last Set.
  int64_t seen() const;

  // The fault for a read of `path` (counting it), or kNone.
  Fault Take(const std::string& path);

 private:
  mutable std::mutex mu_;
  Fault fault_;       // guarded by mu_
  int64_t seen_ = 0;  // guarded by mu_
  int64_t hits_ = 0;  // guarded by mu_
};

// Readers that wrap io::CreateBatchReader's and apply `plan`.
io::ReaderFactory FaultyReaderFactory(std::shared_ptr<FaultPlan> plan);

// Readers that do every read inside Submit (pread), so all of a batch has
// landed when Submit returns: makes "these reads are done" deterministic.
io::ReaderFactory SyncReaderFactory();

}  // namespace flotilla::testutil

#endif  // FLOTILLA_SHARED_TESTING_FAULTY_READER_H_
