// The BPE model of a Hugging Face tokenizer.json: a vocabulary and ranked
// merge rules, applied to one pre-token ("word") at a time the way the Rust
// `tokenizers` crate does (BPE::merge_word): start from single units, then
// repeatedly apply the lowest-ranked merge among adjacent symbols (leftmost
// on ties). Unlike tiktoken's rank-of-the-result scheme (byte_pair.h), the
// order here is that of the merges list, which need not follow token ids.
#ifndef FLOTILLA_SHARED_TOKENIZER_HF_BPE_H_
#define FLOTILLA_SHARED_TOKENIZER_HF_BPE_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

struct HfBpeOptions {
  // Units a word starts from: single bytes (byte-level BPE, whose
  // vocabulary is stored as raw bytes) or UTF-8 characters (SentencePiece
  // style, where a character outside the vocabulary needs byte_fallback).
  bool byte_units = false;
  // A unit outside the vocabulary becomes its bytes' <0xNN> tokens.
  bool byte_fallback = false;
  // Otherwise it becomes unk_id (-1: dropped, as the Rust crate does);
  // fuse_unk turns a run of them into one.
  int32_t unk_id = -1;
  bool fuse_unk = false;
  // A word that is itself in the vocabulary is that token, merges unused
  // (Llama 3).
  bool ignore_merges = false;
};

class HfBpe {
 public:
  // vocab: (token, id); merges: (left, right) in rank order. Errors name the
  // offending merge: a side or the merged token outside the vocabulary.
  static absl::StatusOr<HfBpe> Create(
      std::vector<std::pair<std::string, int32_t>> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges,
      const HfBpeOptions& options);

  // Appends the ids of `word`. Total on arbitrary bytes: with byte_units
  // every byte must be in the vocabulary (checked by Create when the
  // vocabulary is byte-level), otherwise invalid UTF-8 bytes are single
  // units.
  void Encode(absl::string_view word, std::vector<int32_t>* out) const;

  // Id of `token` in the vocabulary, or -1.
  int32_t IdOf(absl::string_view token) const;
  // Token of `id` ("" for an id no vocabulary entry has).
  const std::string& TokenOf(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(tokens_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // the merged token
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
           static_cast<uint32_t>(b);
  }
  void InitialSymbols(absl::string_view word, std::vector<int32_t>* ids) const;

  HfBpeOptions options_;
  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // by id
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // <0xNN> or, byte_units, the byte
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_HF_BPE_H_
