// Splits text into pre-tokens with a PCRE2 pattern, the way tiktoken's
// find_iter does, but total on arbitrary bytes.
#ifndef FLOTILLA_SHARED_TOKENIZER_PRETOKENIZER_H_
#define FLOTILLA_SHARED_TOKENIZER_PRETOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// pcre2_code_8 without including pcre2.h in every user of this header.
struct pcre2_real_code_8;

namespace flotilla::tokenizer {

class Pretokenizer {
 public:
  // Compiles `pattern` (PCRE2 syntax) with UTF, UCP and MATCH_INVALID_UTF,
  // JIT-compiling it when the platform allows. Errors carry PCRE2's message
  // and offset.
  static absl::StatusOr<std::unique_ptr<Pretokenizer>> Create(
      const std::string& pattern);
  static absl::StatusOr<std::unique_ptr<Pretokenizer>> Kimi();
  static absl::StatusOr<std::unique_ptr<Pretokenizer>> Cl100k();
  static absl::StatusOr<std::unique_ptr<Pretokenizer>> O200k();

  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  // Calls `emit` for each piece in order. The pieces tile `text` exactly:
  // successive leftmost non-overlapping matches, plus, between them, any run
  // of bytes no match covers. For valid UTF-8 and the patterns in
  // patterns.h such runs never occur (every character starts some branch);
  // they carry invalid UTF-8 so that it is still encoded, byte-wise.
  // Thread-safe: each call uses its own match data.
  void Split(absl::string_view text,
             absl::FunctionRef<void(absl::string_view)> emit) const;
  std::vector<absl::string_view> Split(absl::string_view text) const;

 private:
  explicit Pretokenizer(pcre2_real_code_8* code) : code_(code) {}

  pcre2_real_code_8* code_;
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_PRETOKENIZER_H_
