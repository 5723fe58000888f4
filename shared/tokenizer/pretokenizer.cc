#include "shared/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shared/tokenizer/patterns.h"
#include "shared/tokenizer/utf8.h"

namespace flotilla::tokenizer {
namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Pretokenizer>> Pretokenizer::Create(
    const std::string& pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF: invalid UTF-8 subjects are matched (invalid bytes
  // simply never match) instead of being rejected up front.
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
      &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(
        absl::StrCat("PCRE2 pattern error at offset ", error_offset, ": ",
                     reinterpret_cast<const char*>(message)));
  }
  // A JIT failure (e.g. no executable memory) is not an error: the
  // interpreter gives identical results, only slower.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<Pretokenizer>(new Pretokenizer(code));
}

absl::StatusOr<std::unique_ptr<Pretokenizer>> Pretokenizer::Kimi() {
  return Create(KimiPattern());
}

absl::StatusOr<std::unique_ptr<Pretokenizer>> Pretokenizer::Cl100k() {
  return Create(Cl100kPattern());
}

absl::StatusOr<std::unique_ptr<Pretokenizer>> Pretokenizer::O200k() {
  return Create(O200kPattern());
}

Pretokenizer::~Pretokenizer() { pcre2_code_free(code_); }

void Pretokenizer::Split(
    absl::string_view text,
    absl::FunctionRef<void(absl::string_view)> emit) const {
  const size_t n = text.size();
  if (n == 0) return;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(code_, nullptr));
  if (md == nullptr) {  // Out of memory: one piece still round-trips.
    emit(text);
    return;
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t emitted = 0;  // Everything before this has been emitted.
  size_t search = 0;   // Where the next match attempt starts.
  while (search < n) {
    int rc = pcre2_match(code_, subject, n, search, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The interpreter keeps its backtracking state on the heap.
      rc = pcre2_match(code_, subject, n, search, PCRE2_NO_JIT, md.get(),
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // A match or heap limit: leave this character to the byte-level gap
      // rather than fail; encoding must be total.
      search += Utf8UnitLength(text, search);
      continue;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(md.get());
    const size_t start = ovector[0];
    const size_t end = ovector[1];
    if (end <= start) {  // Empty match: none of our patterns allow one.
      search = start + Utf8UnitLength(text, start);
      continue;
    }
    if (start > emitted) emit(text.substr(emitted, start - emitted));
    emit(text.substr(start, end - start));
    emitted = search = end;
  }
  if (emitted < n) emit(text.substr(emitted));
}

std::vector<absl::string_view> Pretokenizer::Split(
    absl::string_view text) const {
  std::vector<absl::string_view> pieces;
  Split(text, [&](absl::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace flotilla::tokenizer
