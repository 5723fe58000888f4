// A tokenizer read from a Hugging Face tokenizer.json (+ tokenizer_config.
// json): added tokens, normalizer, pre-tokenizer, BPE model, post-processor
// and decoder, id-exact with the Rust `tokenizers` crate for the components
// it supports (hf_pipeline.h): SentencePiece-style BPE with byte fallback
// (Llama 2, Mixtral, TinyStories) and byte-level BPE with a split regex
// (GPT-2, Qwen, Llama 3). Anything else in the file is refused with an
// error naming the field.
#ifndef FLOTILLA_SHARED_TOKENIZER_HF_TOKENIZER_H_
#define FLOTILLA_SHARED_TOKENIZER_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "shared/tokenizer/added_tokens.h"
#include "shared/tokenizer/hf_bpe.h"
#include "shared/tokenizer/hf_pipeline.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::tokenizer {

class HfTokenizer : public Tokenizer {
 public:
  // <dir>/tokenizer.json, and <dir>/tokenizer_config.json when present.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(
      const std::string& dir);
  // From the files' text; `config_json` may be empty. `source` names the
  // tokenizer in errors.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(
      absl::string_view tokenizer_json, absl::string_view config_json,
      const std::string& source);

  // With the post-processor's special tokens (e.g. BOS), like HF's
  // encode(text) with add_special_tokens.
  std::vector<int32_t> Encode(absl::string_view text) const override;
  // Special added tokens are skipped (skip_special_tokens); the result may
  // end inside a UTF-8 character when the ids do.
  absl::StatusOr<std::string> Decode(
      const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t AddedTokenId(absl::string_view content) const override;
  // EOS, then BOS (a generated BOS begins a new document).
  std::vector<int32_t> StopIds() const override;

  int32_t bos_id() const { return bos_id_; }  // -1: none
  int32_t eos_id() const { return eos_id_; }  // -1: none

 private:
  HfTokenizer() = default;
  absl::Status ParseModel(const nlohmann::json& model);
  absl::Status ParseAddedTokens(const nlohmann::json& doc);
  // Byte-level vocabularies may also list their special tokens as plain
  // text (DeepSeek-V3's '<｜begin▁of▁sentence｜>'): BPE can never produce
  // them, so they stay out of its table, and each must be an added token of
  // the same id (checked once the added tokens are read).
  absl::Status CheckUnmappedVocab() const;
  std::vector<std::pair<std::string, int32_t>> unmapped_vocab_;
  absl::Status ParsePostProcessor(const nlohmann::json& doc);
  absl::Status ParseConfig(absl::string_view config_json);
  absl::StatusOr<int32_t> TokenId(const nlohmann::json& value,
                                  const std::string& where) const;
  void EncodeSegment(absl::string_view segment, bool first,
                     std::vector<int32_t>* out) const;

  std::string source_;
  HfPipeline pipeline_;
  HfBpe bpe_;
  AddedTokenMatcher added_;
  absl::flat_hash_set<int32_t> special_;
  std::vector<int32_t> prefix_, suffix_;  // post-processor specials
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1, eos_id_ = -1;
  // tokenizer_config.json's clean_up_tokenization_spaces: transformers'
  // decode then removes the space before . ? ! , and English clitics.
  bool clean_up_spaces_ = false;
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_HF_TOKENIZER_H_
