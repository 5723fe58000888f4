// The state of a sequence in a grouped-query-attention decoder: each
// layer's key and value cache ([rows][kv_heads * head_dim]) and the
// position of its first row, which a sliding layer advances as it drops
// rows no later token can see (GqaAttention::TrimToWindow). Save / Load
// write and read it with state_codec; a family derives its sequence type
// from it (adding Clone) so one family's state is never taken for
// another's.
#ifndef FLOTILLA_COORDINATOR_MODEL_KV_CACHE_SEQUENCE_H_
#define FLOTILLA_COORDINATOR_MODEL_KV_CACHE_SEQUENCE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/model/language_model.h"
#include "coordinator/model/state_codec.h"

namespace flotilla::coordinator {

struct KvCacheSequence : public ModelSequence {
  std::vector<std::vector<float>> keys, values;  // by layer
  std::vector<size_t> first;  // by layer: the position of the first row
  // By layer: the sliding window (0: every position), which TrimToWindow
  // cuts the cache to; set by the model.
  std::vector<size_t> window;
  size_t positions = 0;

  void Start(size_t layers) {
    keys.resize(layers);
    values.resize(layers);
    first.assign(layers, 0);
    window.assign(layers, 0);
  }

  // Truncate works while no window has trimmed a row, and `added` more
  // positions will not make one trim (a layer with window W keeps W - 1).
  bool PrepareUndo(size_t added) override {
    for (size_t l = 0; l < keys.size(); ++l) {
      if (first[l] != 0) return false;
      if (window[l] > 0 && positions + added > window[l] - 1) return false;
    }
    return true;
  }

  // No sliding window: nothing is ever trimmed, so Truncate always works.
  bool RewindsAnywhere() const override {
    for (size_t l = 0; l < keys.size(); ++l) {
      if (window[l] > 0 || first[l] != 0) return false;
    }
    return true;
  }

  size_t bytes() const override {
    size_t total = 0;
    // Memory held: the caches grow by appending, so capacity, not size.
    for (const auto& k : keys) total += k.capacity() * sizeof(float);
    for (const auto& v : values) total += v.capacity() * sizeof(float);
    return total;
  }

  // Every layer still holds every position (no window trimmed one away):
  // drop the rows from `n` on.
  bool Truncate(size_t n) override {
    if (n > positions) return false;
    for (size_t l = 0; l < keys.size(); ++l) {
      if (first[l] != 0) return false;
    }
    for (size_t l = 0; l < keys.size() && positions > 0; ++l) {
      const size_t width = keys[l].size() / positions;
      keys[l].resize(n * width);
      values[l].resize(n * width);
    }
    positions = n;
    return true;
  }

  absl::Status Save(std::string* out) const override {
    state_codec::PutHeader(out, positions, keys.size());
    for (size_t l = 0; l < keys.size(); ++l) {
      state_codec::PutFloats(out, keys[l]);
      state_codec::PutFloats(out, values[l]);
    }
    return absl::OkStatus();
  }

  // Reads what Save wrote for a model of `layers` layers, at most
  // `max_positions` positions and rows of `row_width` floats, where layer l
  // holds held_rows(l, positions) rows (the last ones). InvalidArgument on
  // any disagreement or cut.
  absl::Status Load(
      absl::string_view bytes, size_t layers, uint64_t max_positions,
      uint64_t row_width,
      const std::function<uint64_t(size_t, uint64_t)>& held_rows) {
    state_codec::Reader in(bytes);
    absl::StatusOr<uint64_t> saved = in.Header(layers, max_positions);
    if (!saved.ok()) return saved.status();
    positions = *saved;
    const std::vector<size_t> windows = window;
    Start(layers);
    if (windows.size() == layers) window = windows;
    for (size_t l = 0; l < layers; ++l) {
      const uint64_t rows = held_rows(l, positions);
      first[l] = positions - rows;
      absl::Status s = in.Floats(rows * row_width, &keys[l], "keys");
      if (s.ok()) s = in.Floats(rows * row_width, &values[l], "values");
      if (!s.ok()) return s;
    }
    return in.Finish();
  }
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_KV_CACHE_SEQUENCE_H_
