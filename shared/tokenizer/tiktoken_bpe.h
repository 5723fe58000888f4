// A tiktoken-compatible tokenizer over arbitrary ranks, split pattern and
// added tokens. Tokenizer::LoadKimi builds one with the Kimi pattern; tests
// build others with the cl100k_base and o200k_base patterns.
#ifndef FLOTILLA_SHARED_TOKENIZER_TIKTOKEN_BPE_H_
#define FLOTILLA_SHARED_TOKENIZER_TIKTOKEN_BPE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/tokenizer/added_tokens.h"
#include "shared/tokenizer/byte_pair.h"
#include "shared/tokenizer/pretokenizer.h"
#include "shared/tokenizer/tiktoken_file.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::tokenizer {

class TiktokenBpe : public Tokenizer {
 public:
  // Validates that ranks and added-token ids are distinct, that every one
  // of the 256 single bytes has a rank (byte-level BPE must be able to
  // encode any input), and that added-token contents are distinct.
  static absl::StatusOr<std::unique_ptr<TiktokenBpe>> Create(
      std::vector<RankEntry> ranks, std::unique_ptr<Pretokenizer> pretokenizer,
      std::vector<AddedToken> added_tokens);

  // Reads a tiktoken.model file and, unless `config_path` is empty, the
  // added tokens of a tokenizer_config.json. Every error names the file.
  static absl::StatusOr<std::unique_ptr<TiktokenBpe>> Load(
      const std::string& model_path, const std::string& config_path,
      std::unique_ptr<Pretokenizer> pretokenizer);

  std::vector<int32_t> Encode(absl::string_view text) const override;
  absl::StatusOr<std::string> Decode(
      const std::vector<int32_t>& ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t AddedTokenId(absl::string_view content) const override;
  // <|end_of_msg|> when it is an added token (the Kimi chat turn end).
  std::vector<int32_t> StopIds() const override;

  // Encodes without looking for added tokens (tiktoken's encode_ordinary).
  void EncodeOrdinary(absl::string_view text, std::vector<int32_t>* out) const;
  std::vector<int32_t> EncodeOrdinary(absl::string_view text) const;

  int32_t num_ranks() const { return static_cast<int32_t>(ranks_.size()); }

 private:
  TiktokenBpe() = default;

  RankMap ranks_;
  // Id -> bytes for ranks and added tokens alike; "" marks an unused id.
  std::vector<std::string> decoder_;
  AddedTokenMatcher added_;
  std::unique_ptr<Pretokenizer> pretokenizer_;
  int32_t vocab_size_ = 0;
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_TIKTOKEN_BPE_H_
