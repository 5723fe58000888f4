// Fast non-cryptographic checksums for pack verification and tests.
#ifndef FLOTILLA_SHARED_IO_CHECKSUM_H_
#define FLOTILLA_SHARED_IO_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::io {

// XXH3_64bits with seed 0: the same value `xxhsum -H3` prints, so a manifest
// checksum can be checked by hand. Empty input -> 0x2d06800538d394c2.
uint64_t Checksum64(const void* data, size_t n);

// Streaming form for regions too large to hold in memory at once; Digest()
// after any sequence of Update() calls equals Checksum64 of the
// concatenation.
class Checksum64Stream {
 public:
  Checksum64Stream();
  ~Checksum64Stream();
  Checksum64Stream(const Checksum64Stream&) = delete;
  Checksum64Stream& operator=(const Checksum64Stream&) = delete;

  void Update(const void* data, size_t n);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t*, kept opaque so xxhash.h stays private.
};

// 16 lower-case hex digits, zero-padded: "2d06800538d394c2".
std::string ChecksumHex(uint64_t checksum);

// Inverse of ChecksumHex (accepts upper case and an optional "0x").
absl::StatusOr<uint64_t> ParseChecksumHex(absl::string_view text);

}  // namespace flotilla::io

#endif  // FLOTILLA_SHARED_IO_CHECKSUM_H_
