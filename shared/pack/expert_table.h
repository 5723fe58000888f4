// expert_table.bin: the routed experts of a pack as fixed-size binary
// records, next to manifest.json. A full Kimi K3 pack lists ~83,000 experts;
// as JSON that was 12 MB to parse at every start and a DOM several times
// that, as records it is 7.3 MB read straight into the vector.
//
// Layout (little-endian):
//   header, 24 bytes: magic "FLOTXPT\x01", u32 record bytes (112),
//                     u32 reserved (0), u64 record count
//   records, 112 bytes each, sorted by (layer, expert):
//     i32 layer, i32 expert, u32 file (index into expert_files), u32 0,
//     u64 offset, u64 length, u64 checksum (XXH3-64 of the run),
//     u64 tensor_offsets[9]
// Tables of 88-byte records (six tensor offsets, before the mxfp4_bias
// format) are still read.
// manifest.json records the count and the XXH3-64 of the whole file, so a
// table from another pack (or a torn write) is refused before use.
#ifndef FLOTILLA_SHARED_PACK_EXPERT_TABLE_H_
#define FLOTILLA_SHARED_PACK_EXPERT_TABLE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/pack/pack_manifest.h"

namespace flotilla::pack {

inline constexpr char kExpertTableFile[] = "expert_table.bin";
inline constexpr size_t kExpertTableHeaderBytes = 24;
inline constexpr size_t kExpertRecordBytes = 112;
inline constexpr size_t kSixOffsetRecordBytes = 88;

std::string EncodeExpertTable(const std::vector<PackExpert>& experts);

// Decodes `bytes` and checks what each record says on its own (length > 0,
// offset + length fits, tensor offsets inside the run); checks across
// records and against the config are pack_manifest's. DataLoss naming
// `source` and the record on any fault.
absl::StatusOr<std::vector<PackExpert>> DecodeExpertTable(
    absl::string_view bytes, absl::string_view source);

}  // namespace flotilla::pack

#endif  // FLOTILLA_SHARED_PACK_EXPERT_TABLE_H_
