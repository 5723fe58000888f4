// Bytes of a sequence state (ModelSequence::Save / LanguageModel::
// LoadSequence): little-endian u64 counts and float32 arrays, each array
// length-prefixed. The reader checks every length against what is left,
// so truncated or hostile bytes are an error, never an overread.
#ifndef FLOTILLA_COORDINATOR_MODEL_STATE_CODEC_H_
#define FLOTILLA_COORDINATOR_MODEL_STATE_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace flotilla::coordinator::state_codec {

inline void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}

// The header every per-layer state starts with: positions, then layers.
inline void PutHeader(std::string* out, uint64_t positions, uint64_t layers) {
  PutU64(out, positions);
  PutU64(out, layers);
}

inline void PutFloats(std::string* out, const std::vector<float>& v) {
  PutU64(out, v.size());
  // float32 is little-endian IEEE on every machine this builds for.
  out->append(reinterpret_cast<const char*>(v.data()),
              v.size() * sizeof(float));
}

class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}

  absl::StatusOr<uint64_t> U64() {
    if (rest_.size() < 8) return Short("a count");
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t{static_cast<uint8_t>(rest_[i])} << (8 * i);
    rest_.remove_prefix(8);
    return v;
  }
  // An array of exactly `expected` floats.
  absl::Status Floats(uint64_t expected, std::vector<float>* v,
                      absl::string_view what) {
    absl::StatusOr<uint64_t> n = U64();
    if (!n.ok()) return n.status();
    if (*n != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("saved state: ", what, " holds ", *n,
                       " values where this model has ", expected));
    }
    if (rest_.size() / sizeof(float) < *n) return Short(what);
    v->resize(*n);
    std::memcpy(v->data(), rest_.data(), *n * sizeof(float));
    rest_.remove_prefix(*n * sizeof(float));
    return absl::OkStatus();
  }
  // PutHeader's counts, checked against the model: `layers` exactly, at
  // most `max_positions`; returns the positions.
  absl::StatusOr<uint64_t> Header(uint64_t layers, uint64_t max_positions) {
    absl::StatusOr<uint64_t> positions = U64();
    if (!positions.ok()) return positions.status();
    absl::StatusOr<uint64_t> saved_layers = U64();
    if (!saved_layers.ok()) return saved_layers.status();
    if (*saved_layers != layers || *positions > max_positions) {
      return absl::InvalidArgumentError(absl::StrCat(
          "saved state: ", *saved_layers, " layers and ", *positions,
          " positions do not fit this model (", layers, " layers)"));
    }
    return *positions;
  }
  absl::Status Finish() const {
    if (!rest_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("saved state: ", rest_.size(), " bytes past its end"));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Short(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("saved state: cut short at ", what));
  }
  absl::string_view rest_;
};

}  // namespace flotilla::coordinator::state_codec

#endif  // FLOTILLA_COORDINATOR_MODEL_STATE_CODEC_H_
