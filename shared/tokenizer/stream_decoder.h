// Incremental detokenization for printing tokens as they are generated.
// Decoding one id at a time is wrong for two reasons: a byte-fallback or
// byte-level token can end inside a UTF-8 character, and decoders look at
// neighbours (SentencePiece strips the leading space of the text only).
// StreamDecoder decodes a short window of recent ids, and releases text
// only when it ends on a complete character, so what it prints, summed,
// equals decoding all ids at once.
#ifndef FLOTILLA_SHARED_TOKENIZER_STREAM_DECODER_H_
#define FLOTILLA_SHARED_TOKENIZER_STREAM_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::tokenizer {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // The new text `id` completes ("" while a character is still open).
  absl::StatusOr<std::string> Next(int32_t id);
  // Whatever is still held at the end (an unfinished character's bytes).
  absl::StatusOr<std::string> Finish();
  // Takes everything given so far as printed elsewhere (a prompt): later
  // text is only what later ids add, even when the ids so far end inside
  // a character. The last id stays as the neighbour later ids decode after.
  void Commit();

 private:
  const Tokenizer* tokenizer_;
  std::vector<int32_t> ids_;
  // ids_[prefix_..read_) decode to text already printed; ids from read_
  // on have not been printed yet.
  size_t prefix_ = 0, read_ = 0;
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_STREAM_DECODER_H_
