#include "shared/io/checksum.h"

#include <xxhash.h>

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace flotilla::io {

uint64_t Checksum64(const void* data, size_t n) { return XXH3_64bits(data, n); }

Checksum64Stream::Checksum64Stream() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Checksum64Stream::~Checksum64Stream() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void Checksum64Stream::Update(const void* data, size_t n) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n);
}

uint64_t Checksum64Stream::Digest() const {
  return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_));
}

std::string ChecksumHex(uint64_t checksum) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(checksum));
  return std::string(buf, 16);
}

absl::StatusOr<uint64_t> ParseChecksumHex(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (!absl::ConsumePrefix(&s, "0x")) absl::ConsumePrefix(&s, "0X");
  uint64_t value = 0;
  if (s.empty() || s.size() > 16 || !absl::SimpleHexAtoi(s, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a 64-bit hex checksum: \"", text, "\""));
  }
  return value;
}

}  // namespace flotilla::io
