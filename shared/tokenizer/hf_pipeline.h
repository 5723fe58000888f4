// The text stages of a Hugging Face tokenizer.json around its model:
// normalizer, pre-tokenizer and decoder, parsed into plain step lists and
// applied the way the Rust `tokenizers` crate applies them. Only the
// components real MoE checkpoints use are supported; any other type is
// refused with an error naming the field and the type, never ignored.
//
//   normalizer:    Sequence, Prepend, Replace (String pattern), NFC, NFD,
//                  NFKC, NFKD
//   pre_tokenizer: Sequence, Split (Regex or String pattern, Isolated),
//                  ByteLevel, Metaspace
//   decoder:       Sequence, Replace (String pattern), ByteFallback, Fuse,
//                  Strip, ByteLevel, Metaspace
//
// Byte-level tokenizers (a ByteLevel pre-tokenizer) keep tokens as raw
// bytes, so the ByteLevel steps only split and prefix; they never map bytes
// to GPT-2's printable alphabet and back.
#ifndef FLOTILLA_SHARED_TOKENIZER_HF_PIPELINE_H_
#define FLOTILLA_SHARED_TOKENIZER_HF_PIPELINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "shared/tokenizer/pretokenizer.h"

namespace flotilla::tokenizer {

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace, kNfc, kNfd, kNfkc, kNfkd };
  Kind kind;
  std::string from, to;  // Prepend: to; Replace: from -> to
};

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  Kind kind;
  std::shared_ptr<const Pretokenizer> regex;  // Split; ByteLevel use_regex
  bool add_prefix_space = false;              // ByteLevel
  std::string replacement;                    // Metaspace
  std::string prepend_scheme;                 // Metaspace: always first never
  bool split = false;                         // Metaspace
};

struct DecoderStep {
  enum class Kind {
    kReplace,
    kByteFallback,
    kFuse,
    kStrip,
    kByteLevel,
    kMetaspace
  };
  Kind kind;
  std::string from, to;     // Replace; Strip: from = content; Metaspace: from
  int start = 0, stop = 0;  // Strip
  std::string prepend_scheme;  // Metaspace
};

struct HfPipeline {
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::vector<DecoderStep> decoder;
  bool byte_level = false;  // a ByteLevel pre-tokenizer or decoder

  // Parses the three sections of a tokenizer.json (each may be null).
  static absl::StatusOr<HfPipeline> Parse(const nlohmann::json& doc);

  // Normalizes one segment of text between added tokens.
  std::string Normalize(absl::string_view text) const;
  // Splits a normalized segment into words for the model; `first` says
  // whether the segment starts the text (Metaspace's "first" scheme).
  std::vector<std::string> PreTokenize(std::string segment, bool first) const;
  // Token strings (raw bytes for byte-level vocabularies) -> text bytes.
  std::string Decode(std::vector<std::string> tokens) const;
};

// `pattern` in the Oniguruma syntax of tokenizer.json rewritten for PCRE2:
// \s and \S become the Unicode White_Space property Oniguruma means (PCRE2's
// own \s also takes U+180E). InvalidArgument for a \S inside a class.
absl::StatusOr<std::string> OnigurumaToPcre2(absl::string_view pattern);

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_HF_PIPELINE_H_
