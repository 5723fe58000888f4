#include "shared/pack/expert_table.h"

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace flotilla::pack {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'O', 'T', 'X', 'P', 'T', '\x01'};

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

absl::Status Bad(absl::string_view source, const std::string& what) {
  return absl::DataLossError(
      absl::StrCat("expert table ", source, ": ", what,
                   " (re-run flotilla-tool pack to rewrite it)"));
}

}  // namespace

std::string EncodeExpertTable(const std::vector<PackExpert>& experts) {
  std::string out(kMagic, sizeof(kMagic));
  out.reserve(kExpertTableHeaderBytes + experts.size() * kExpertRecordBytes);
  PutU32(kExpertRecordBytes, &out);
  PutU32(0, &out);
  PutU64(experts.size(), &out);
  for (const PackExpert& e : experts) {
    PutU32(static_cast<uint32_t>(e.layer), &out);
    PutU32(static_cast<uint32_t>(e.expert), &out);
    PutU32(static_cast<uint32_t>(e.file), &out);
    PutU32(0, &out);
    PutU64(e.offset, &out);
    PutU64(e.length, &out);
    PutU64(e.checksum, &out);
    for (uint64_t t : e.tensor_offsets) PutU64(t, &out);
  }
  return out;
}

absl::StatusOr<std::vector<PackExpert>> DecodeExpertTable(
    absl::string_view bytes, absl::string_view source) {
  if (bytes.size() < kExpertTableHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Bad(source, absl::StrCat("not an expert table (", bytes.size(),
                                    " bytes, no FLOTXPT\\x01 header)"));
  }
  const char* p = bytes.data();
  const uint32_t record_bytes = GetU32(p + 8);
  const uint64_t count = GetU64(p + 16);
  if ((record_bytes != kExpertRecordBytes &&
       record_bytes != kSixOffsetRecordBytes) ||
      GetU32(p + 12) != 0) {
    return Bad(
        source,
        absl::StrCat("records of ", record_bytes, " bytes; this build reads ",
                     kExpertRecordBytes, " or ", kSixOffsetRecordBytes));
  }
  const int offsets = static_cast<int>((record_bytes - 40) / 8);
  const uint64_t body = bytes.size() - kExpertTableHeaderBytes;
  if (body % record_bytes != 0 || body / record_bytes != count) {
    return Bad(
        source,
        absl::StrCat("header says ", count, " records but the file has ", body,
                     " bytes after it (", record_bytes, " per record)"));
  }
  std::vector<PackExpert> experts(count);
  p += kExpertTableHeaderBytes;
  for (uint64_t i = 0; i < count; ++i, p += record_bytes) {
    PackExpert& e = experts[i];
    const uint32_t layer = GetU32(p), expert = GetU32(p + 4);
    const uint32_t file = GetU32(p + 8);
    const std::string where = absl::StrCat("record ", i);
    if (layer > INT32_MAX || expert > INT32_MAX || file > INT32_MAX ||
        GetU32(p + 12) != 0) {
      return Bad(source,
                 absl::StrCat(where, ": layer ", layer, ", expert ", expert,
                              " or file ", file, " out of range"));
    }
    e.layer = static_cast<int>(layer);
    e.expert = static_cast<int>(expert);
    e.file = static_cast<int>(file);
    e.offset = GetU64(p + 16);
    e.length = GetU64(p + 24);
    e.checksum = GetU64(p + 32);
    for (int t = 0; t < offsets; ++t) {
      e.tensor_offsets[t] = GetU64(p + 40 + 8 * t);
    }
    const std::string what =
        absl::StrCat(where, " (layer ", e.layer, ", expert ", e.expert, ")");
    if (e.length == 0 || e.offset > UINT64_MAX - e.length) {
      return Bad(source, absl::StrCat(what,
                                      ": length must be > 0 and offset + "
                                      "length must fit"));
    }
    for (uint64_t t : e.tensor_offsets) {
      if (t >= e.length && t != 0) {
        return Bad(source,
                   absl::StrCat(what, ": tensor offset ", t,
                                " is outside the run of ", e.length, " bytes"));
      }
    }
  }
  return experts;
}

}  // namespace flotilla::pack
