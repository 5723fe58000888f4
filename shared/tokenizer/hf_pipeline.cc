#include "shared/tokenizer/hf_pipeline.h"

#include <utf8proc.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "shared/base/status_macros.h"
#include "shared/tokenizer/json_fields.h"
#include "shared/tokenizer/patterns.h"

namespace flotilla::tokenizer {
namespace {

using json = nlohmann::json;
using internal::OptionalBool;
using internal::OptionalInt;
using internal::OptionalString;

// GPT-2's split pattern, which ByteLevel applies when use_regex is set.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::Status Unsupported(const std::string& where, const std::string& type) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": unsupported type '", type,
                   "' (see shared/tokenizer/hf_pipeline.h "
                   "for the supported components)"));
}

// The string field `key` of `j`, or an error naming `where`.`key`.
absl::StatusOr<std::string> StringField(const json& j, const char* key,
                                        const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", key, " must be a string"));
  }
  return it->get<std::string>();
}

// A Replace/Split pattern: {"String": s} or {"Regex": r}.
absl::StatusOr<std::pair<bool, std::string>> Pattern(const json& j,
                                                     const std::string& where) {
  const auto it = j.find("pattern");
  if (it != j.end() && it->is_object()) {
    if (it->contains("String") && (*it)["String"].is_string()) {
      return std::make_pair(false, (*it)["String"].get<std::string>());
    }
    if (it->contains("Regex") && (*it)["Regex"].is_string()) {
      return std::make_pair(true, (*it)["Regex"].get<std::string>());
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, ".pattern must be {\"String\": ...} or {\"Regex\": ...}"));
}

// Steps of a component: a Sequence's list (under `list_key`), one step, or
// none for null.
absl::StatusOr<std::vector<std::pair<json, std::string>>> Flatten(
    const json& j, const std::string& where, const char* list_key) {
  std::vector<std::pair<json, std::string>> steps;
  if (j.is_null()) return steps;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " must be null or an object with a \"type\""));
  }
  if (j["type"] != "Sequence") {
    steps.emplace_back(j, where);
    return steps;
  }
  if (!j.contains(list_key) || !j[list_key].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", list_key, " must be an array"));
  }
  for (size_t i = 0; i < j[list_key].size(); ++i) {
    const std::string at = absl::StrCat(where, ".", list_key, "[", i, "]");
    FLOTILLA_ASSIGN_OR_RETURN(auto inner,
                              Flatten(j[list_key][i], at, list_key));
    for (auto& s : inner) steps.push_back(std::move(s));
  }
  return steps;
}

std::string EscapeRegex(absl::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const Pretokenizer>> CompileSplit(
    absl::string_view onig, const std::string& where) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string pcre, OnigurumaToPcre2(onig));
  auto compiled = Pretokenizer::Create(pcre);
  if (!compiled.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".pattern: ", compiled.status().message()));
  }
  return std::shared_ptr<const Pretokenizer>(std::move(*compiled));
}

absl::Status ParseNormalizer(const json& doc, HfPipeline* p) {
  FLOTILLA_ASSIGN_OR_RETURN(auto steps, Flatten(doc.value("normalizer", json()),
                                                "normalizer", "normalizers"));
  for (const auto& [j, where] : steps) {
    const std::string type = j["type"];
    NormalizerStep s;
    if (type == "Prepend") {
      s.kind = NormalizerStep::Kind::kPrepend;
      FLOTILLA_ASSIGN_OR_RETURN(s.to, StringField(j, "prepend", where));
    } else if (type == "Replace") {
      s.kind = NormalizerStep::Kind::kReplace;
      FLOTILLA_ASSIGN_OR_RETURN(auto pattern, Pattern(j, where));
      if (pattern.first) return Unsupported(where + ".pattern", "Regex");
      s.from = pattern.second;
      FLOTILLA_ASSIGN_OR_RETURN(s.to, StringField(j, "content", where));
    } else if (type == "NFC") {
      s.kind = NormalizerStep::Kind::kNfc;
    } else if (type == "NFD") {
      s.kind = NormalizerStep::Kind::kNfd;
    } else if (type == "NFKC") {
      s.kind = NormalizerStep::Kind::kNfkc;
    } else if (type == "NFKD") {
      s.kind = NormalizerStep::Kind::kNfkd;
    } else {
      return Unsupported(where, type);
    }
    p->normalizer.push_back(std::move(s));
  }
  return absl::OkStatus();
}

absl::Status ParsePreTokenizer(const json& doc, HfPipeline* p) {
  FLOTILLA_ASSIGN_OR_RETURN(
      auto steps, Flatten(doc.value("pre_tokenizer", json()), "pre_tokenizer",
                          "pretokenizers"));
  for (const auto& [j, where] : steps) {
    const std::string type = j["type"];
    PreTokenizerStep s;
    if (type == "Split") {
      s.kind = PreTokenizerStep::Kind::kSplit;
      FLOTILLA_ASSIGN_OR_RETURN(auto pattern, Pattern(j, where));
      FLOTILLA_ASSIGN_OR_RETURN(const std::string behavior,
                                OptionalString(j, "behavior", "", where));
      if (behavior != "Isolated") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".behavior: unsupported '", behavior,
                         "' (supported: Isolated)"));
      }
      FLOTILLA_ASSIGN_OR_RETURN(const bool invert,
                                OptionalBool(j, "invert", false, where));
      if (invert) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".invert: true is not supported"));
      }
      FLOTILLA_ASSIGN_OR_RETURN(
          s.regex, CompileSplit(pattern.first ? pattern.second
                                              : EscapeRegex(pattern.second),
                                where));
    } else if (type == "ByteLevel") {
      s.kind = PreTokenizerStep::Kind::kByteLevel;
      FLOTILLA_ASSIGN_OR_RETURN(
          s.add_prefix_space, OptionalBool(j, "add_prefix_space", true, where));
      FLOTILLA_ASSIGN_OR_RETURN(const bool use_regex,
                                OptionalBool(j, "use_regex", true, where));
      if (use_regex) {
        FLOTILLA_ASSIGN_OR_RETURN(s.regex, CompileSplit(kGpt2Pattern, where));
      }
      p->byte_level = true;
    } else if (type == "Metaspace") {
      s.kind = PreTokenizerStep::Kind::kMetaspace;
      FLOTILLA_ASSIGN_OR_RETURN(s.replacement,
                                StringField(j, "replacement", where));
      FLOTILLA_ASSIGN_OR_RETURN(
          s.prepend_scheme,
          OptionalString(j, "prepend_scheme", "always", where));
      FLOTILLA_ASSIGN_OR_RETURN(s.split, OptionalBool(j, "split", true, where));
    } else {
      return Unsupported(where, type);
    }
    p->pre_tokenizer.push_back(std::move(s));
  }
  return absl::OkStatus();
}

absl::Status ParseDecoder(const json& doc, HfPipeline* p) {
  FLOTILLA_ASSIGN_OR_RETURN(
      auto steps, Flatten(doc.value("decoder", json()), "decoder", "decoders"));
  for (const auto& [j, where] : steps) {
    const std::string type = j["type"];
    DecoderStep s;
    if (type == "Replace") {
      s.kind = DecoderStep::Kind::kReplace;
      FLOTILLA_ASSIGN_OR_RETURN(auto pattern, Pattern(j, where));
      if (pattern.first) return Unsupported(where + ".pattern", "Regex");
      s.from = pattern.second;
      FLOTILLA_ASSIGN_OR_RETURN(s.to, StringField(j, "content", where));
    } else if (type == "ByteFallback") {
      s.kind = DecoderStep::Kind::kByteFallback;
    } else if (type == "Fuse") {
      s.kind = DecoderStep::Kind::kFuse;
    } else if (type == "Strip") {
      s.kind = DecoderStep::Kind::kStrip;
      FLOTILLA_ASSIGN_OR_RETURN(s.from, StringField(j, "content", where));
      FLOTILLA_ASSIGN_OR_RETURN(const int64_t start,
                                OptionalInt(j, "start", 0, 0, 1 << 20, where));
      FLOTILLA_ASSIGN_OR_RETURN(const int64_t stop,
                                OptionalInt(j, "stop", 0, 0, 1 << 20, where));
      s.start = static_cast<int>(start);
      s.stop = static_cast<int>(stop);
    } else if (type == "ByteLevel") {
      s.kind = DecoderStep::Kind::kByteLevel;
      p->byte_level = true;
    } else if (type == "Metaspace") {
      s.kind = DecoderStep::Kind::kMetaspace;
      FLOTILLA_ASSIGN_OR_RETURN(s.from, StringField(j, "replacement", where));
      FLOTILLA_ASSIGN_OR_RETURN(
          s.prepend_scheme,
          OptionalString(j, "prepend_scheme", "always", where));
    } else {
      return Unsupported(where, type);
    }
    p->decoder.push_back(std::move(s));
  }
  return absl::OkStatus();
}

std::string Utf8procMap(absl::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  // Invalid UTF-8 is left as it is (it is encoded byte-wise later).
  if (n < 0) return std::string(text);
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

// Tokens "<0xNN>" -> that byte, so a run of them spells UTF-8.
bool ByteFallbackValue(absl::string_view token, char* byte) {
  if (token.size() != 6 || !absl::StartsWith(token, "<0x") || token[5] != '>') {
    return false;
  }
  int value = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = token[k];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return false;
    value = value * 16 + digit;
  }
  *byte = static_cast<char>(value);
  return true;
}

}  // namespace

absl::StatusOr<std::string> OnigurumaToPcre2(absl::string_view pattern) {
  const std::string ws = WhitespaceRanges();
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? ws : absl::StrCat("[", ws, "]");
      } else if (e == 'S') {
        if (in_class) {
          return absl::InvalidArgumentError(
              absl::StrCat("\\S inside a character class at offset ", i - 1,
                           " is not supported"));
        }
        out += absl::StrCat("[^", ws, "]");
      } else {
        out.push_back('\\');
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']')
        out.push_back(pattern[++i]);
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<HfPipeline> HfPipeline::Parse(const nlohmann::json& doc) {
  HfPipeline p;
  FLOTILLA_RETURN_IF_ERROR(ParseNormalizer(doc, &p));
  FLOTILLA_RETURN_IF_ERROR(ParsePreTokenizer(doc, &p));
  FLOTILLA_RETURN_IF_ERROR(ParseDecoder(doc, &p));
  return p;
}

std::string HfPipeline::Normalize(absl::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : normalizer) {
    switch (step.kind) {
      case NormalizerStep::Kind::kPrepend:
        // The Rust crate prepends only to non-empty text.
        if (!s.empty()) s = absl::StrCat(step.to, s);
        break;
      case NormalizerStep::Kind::kReplace:
        s = absl::StrReplaceAll(s, {{step.from, step.to}});
        break;
      case NormalizerStep::Kind::kNfc:
        s = Utf8procMap(s, UTF8PROC_COMPOSE);
        break;
      case NormalizerStep::Kind::kNfd:
        s = Utf8procMap(s, UTF8PROC_DECOMPOSE);
        break;
      case NormalizerStep::Kind::kNfkc:
        s = Utf8procMap(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizerStep::Kind::kNfkd:
        s = Utf8procMap(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
        break;
    }
  }
  return s;
}

std::vector<std::string> HfPipeline::PreTokenize(std::string segment,
                                                 bool first) const {
  std::vector<std::string> pieces;
  pieces.push_back(std::move(segment));
  for (const PreTokenizerStep& step : pre_tokenizer) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      switch (step.kind) {
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.add_prefix_space && !absl::StartsWith(piece, " ")) {
            piece = absl::StrCat(" ", piece);
          }
          if (step.regex == nullptr) {
            next.push_back(std::move(piece));
            break;
          }
          [[fallthrough]];
        case PreTokenizerStep::Kind::kSplit:
          step.regex->Split(
              piece, [&](absl::string_view part) { next.emplace_back(part); });
          break;
        case PreTokenizerStep::Kind::kMetaspace: {
          std::string s = absl::StrReplaceAll(piece, {{" ", step.replacement}});
          const bool prepend = step.prepend_scheme == "always" ||
                               (step.prepend_scheme == "first" && first);
          if (prepend && !absl::StartsWith(s, step.replacement)) {
            s = absl::StrCat(step.replacement, s);
          }
          if (!step.split) {
            next.push_back(std::move(s));
            break;
          }
          // MergedWithNext: each replacement starts a new piece.
          size_t begin = 0;
          for (size_t pos = s.find(step.replacement, 1);
               pos != std::string::npos;
               pos = s.find(step.replacement, pos + 1)) {
            next.push_back(s.substr(begin, pos - begin));
            begin = pos;
          }
          if (begin < s.size()) next.push_back(s.substr(begin));
          break;
        }
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

std::string HfPipeline::Decode(std::vector<std::string> tokens) const {
  for (const DecoderStep& step : decoder) {
    switch (step.kind) {
      case DecoderStep::Kind::kReplace:
        for (std::string& t : tokens) {
          t = absl::StrReplaceAll(t, {{step.from, step.to}});
        }
        break;
      case DecoderStep::Kind::kByteFallback: {
        // Runs of <0xNN> tokens become their bytes. (The Rust crate also
        // turns a run that is not valid UTF-8 into U+FFFD per byte; here
        // bytes are kept so streaming can wait for a character to finish.)
        std::vector<std::string> out;
        char byte;
        for (std::string& t : tokens) {
          if (ByteFallbackValue(t, &byte)) {
            out.emplace_back(1, byte);
          } else {
            out.push_back(std::move(t));
          }
        }
        tokens = std::move(out);
        break;
      }
      case DecoderStep::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecoderStep::Kind::kStrip:
        for (std::string& t : tokens) {
          absl::string_view v = t;
          for (int k = 0; k < step.start && absl::ConsumePrefix(&v, step.from);)
            ++k;
          for (int k = 0; k < step.stop && absl::ConsumeSuffix(&v, step.from);)
            ++k;
          t = std::string(v);
        }
        break;
      case DecoderStep::Kind::kByteLevel:
        break;  // tokens are raw bytes already
      case DecoderStep::Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string t = absl::StrReplaceAll(tokens[i], {{step.from, " "}});
          if (i == 0 && step.prepend_scheme != "never" &&
              absl::StartsWith(t, " ")) {
            t.erase(0, 1);
          }
          tokens[i] = std::move(t);
        }
        break;
    }
  }
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

}  // namespace flotilla::tokenizer
