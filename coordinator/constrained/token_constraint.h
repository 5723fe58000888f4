// Constrained decoding over a tokenizer's vocabulary: each step, every
// token whose text the JsonMatcher would reject is masked out before
// sampling, and so is every token after which the value could no longer
// close within the tokens left (max_tokens), so the output always parses
// and matches its schema. The stop tokens are allowed only where the value
// may end; once it is complete the generation ends.
#ifndef FLOTILLA_COORDINATOR_CONSTRAINED_TOKEN_CONSTRAINT_H_
#define FLOTILLA_COORDINATOR_CONSTRAINED_TOKEN_CONSTRAINT_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/constrained/json_matcher.h"
#include "coordinator/constrained/json_schema.h"
#include "coordinator/generate.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::constrained {

// The bytes each token adds to the text, as decoded after another token
// (so a SentencePiece "▁word" keeps its space), grouped by first byte.
// Built once per tokenizer; shared by every constrained request.
class TokenPieces {
 public:
  static absl::StatusOr<std::shared_ptr<const TokenPieces>> Build(
      const tokenizer::Tokenizer& tokenizer);

  const std::string& piece(int32_t id) const { return pieces_[id]; }
  const std::vector<int32_t>& starting_with(unsigned char b) const {
    return by_first_byte_[b];
  }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  // The tokens with a piece, in byte order of their pieces, and how many
  // leading bytes each shares with the one before it (0 for the first):
  // the order Mask walks, so a prefix is fed to the matcher once for all
  // the tokens that share it.
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<uint16_t>& shared() const { return shared_; }
  size_t longest() const { return longest_; }
  // Characters of a piece that is plain string content (no quote,
  // backslash or control byte, whole valid UTF-8 sequences), else -1; and
  // the pieces that are not, in the same byte order with their shared
  // prefixes (what Mask still feeds inside a string).
  int32_t plain_chars(int32_t id) const { return plain_chars_[id]; }
  const std::vector<int32_t>& others() const { return others_; }
  const std::vector<uint16_t>& others_shared() const { return others_shared_; }

 private:
  std::vector<std::string> pieces_;  // empty: never allowed
  std::array<std::vector<int32_t>, 256> by_first_byte_;
  std::vector<int32_t> stop_ids_;
  std::vector<int32_t> sorted_;
  std::vector<uint16_t> shared_;
  size_t longest_ = 0;
  std::vector<int32_t> plain_chars_;
  std::vector<int32_t> others_;
  std::vector<uint16_t> others_shared_;
};

class JsonConstraint : public TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const CompiledSchema> schema,
                 std::shared_ptr<const TokenPieces> pieces);

  void Mask(float* logits, int vocab, int remaining) override;
  bool Accept(int32_t id) override;

 private:
  std::shared_ptr<const CompiledSchema> schema_;
  std::shared_ptr<const TokenPieces> pieces_;
  JsonMatcher matcher_;
  std::vector<char> allowed_;  // per token, this step
  // Mask's walk over `order` (sorted pieces, `shared` their common
  // prefixes): each valid token into allowed_ (within the budget) or
  // `over_budget`.
  void Walk(const std::vector<int32_t>& order,
            const std::vector<uint16_t>& shared, int vocab, int64_t after,
            bool* any_valid, bool* any_within,
            std::vector<int32_t>* over_budget);
  // states_[d] is the matcher after the first d bytes of the current piece
  // (reused across steps so copies keep their buffers).
  std::vector<JsonMatcher> states_;
};

}  // namespace flotilla::coordinator::constrained

#endif  // FLOTILLA_COORDINATOR_CONSTRAINED_TOKEN_CONSTRAINT_H_
