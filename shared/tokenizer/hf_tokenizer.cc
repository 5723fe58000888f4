#include "shared/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"
#include "shared/tokenizer/byte_level.h"
#include "shared/tokenizer/json_fields.h"

namespace flotilla::tokenizer {
namespace {

using json = nlohmann::json;
using internal::IntIn;
using internal::OptionalBool;
using internal::OptionalString;

// Ids above this are refused: a vocabulary is dense, so a huge id would
// only make the id table huge.
constexpr int64_t kMaxHfTokenId = (int64_t{1} << 21) - 1;

absl::Status Bad(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// A byte-level token's raw bytes, or an error naming it.
absl::StatusOr<std::string> RawBytes(const std::string& shown, bool byte_level,
                                     const std::string& where) {
  if (!byte_level) return shown;
  std::optional<std::string> raw = ByteLevelToBytes(shown);
  if (!raw.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": '", shown, "' is not in the byte-level alphabet"));
  }
  return *std::move(raw);
}

// transformers' clean_up_tokenization, replacement by replacement.
std::string CleanUpTokenizationSpaces(std::string text) {
  for (const auto& [from, to] :
       std::vector<std::pair<const char*, const char*>>{{" .", "."},
                                                        {" ?", "?"},
                                                        {" !", "!"},
                                                        {" ,", ","},
                                                        {" ' ", "'"},
                                                        {" n't", "n't"},
                                                        {" 'm", "'m"},
                                                        {" 's", "'s"},
                                                        {" 've", "'ve"},
                                                        {" 're", "'re"}}) {
    text = absl::StrReplaceAll(text, {{from, to}});
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(
    const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  FLOTILLA_ASSIGN_OR_RETURN(std::string text,
                            model::internal::ReadSmallFile(path));
  std::string config;
  const std::string config_path = dir + "/tokenizer_config.json";
  if (auto c = model::internal::ReadSmallFile(config_path); c.ok()) {
    config = *std::move(c);
  } else if (!absl::IsNotFound(c.status())) {
    return c.status();
  }
  return FromJson(text, config, path);
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(
    absl::string_view tokenizer_json, absl::string_view config_json,
    const std::string& source) {
  FLOTILLA_ASSIGN_OR_RETURN(json doc,
                            model::internal::ParseJson(tokenizer_json, source));
  if (!doc.is_object()) return Bad(source, "the top level must be an object");
  auto t = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  t->source_ = source;
  auto pipeline = HfPipeline::Parse(doc);
  if (!pipeline.ok())
    return Bad(source, std::string(pipeline.status().message()));
  t->pipeline_ = *std::move(pipeline);
  if (!doc.contains("model") || !doc["model"].is_object()) {
    return Bad(source, "model must be an object");
  }
  FLOTILLA_RETURN_IF_ERROR(t->ParseModel(doc["model"]));
  FLOTILLA_RETURN_IF_ERROR(t->ParseAddedTokens(doc));
  FLOTILLA_RETURN_IF_ERROR(t->CheckUnmappedVocab());
  FLOTILLA_RETURN_IF_ERROR(t->ParsePostProcessor(doc));
  FLOTILLA_RETURN_IF_ERROR(t->ParseConfig(config_json));
  return t;
}

absl::Status HfTokenizer::CheckUnmappedVocab() const {
  for (const auto& [token, id] : unmapped_vocab_) {
    if (AddedTokenId(token) != id) {
      return Bad(source_, absl::StrCat("model.vocab: '", token,
                                       "' is not in the byte-level alphabet "
                                       "(and not an added token of id ",
                                       id, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status HfTokenizer::ParseModel(const json& m) {
  FLOTILLA_ASSIGN_OR_RETURN(const std::string type,
                            OptionalString(m, "type", "", source_ + ": model"));
  if (type != "BPE") {
    return Bad(source_, absl::StrCat("model.type: unsupported '", type,
                                     "' (supported: BPE)"));
  }
  if (m.contains("dropout") && !m["dropout"].is_null() &&
      !(m["dropout"].is_number() && m["dropout"].get<double>() == 0)) {
    return Bad(source_, "model.dropout: BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && !m[key].is_null() &&
        !(m[key].is_string() && m[key].get<std::string>().empty())) {
      return Bad(source_, absl::StrCat("model.", key, ": not supported"));
    }
  }
  if (!m.contains("vocab") || !m["vocab"].is_object()) {
    return Bad(source_, "model.vocab must be an object of token: id");
  }
  if (!m.contains("merges") || !m["merges"].is_array()) {
    return Bad(source_, "model.merges must be an array");
  }
  const bool byte_level = pipeline_.byte_level;
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(m["vocab"].size());
  for (const auto& [token, id] : m["vocab"].items()) {
    auto checked =
        IntIn(id, 0, kMaxHfTokenId, absl::StrCat("model.vocab['", token, "']"));
    if (!checked.ok())
      return Bad(source_, std::string(checked.status().message()));
    if (byte_level && !ByteLevelToBytes(token).has_value()) {
      unmapped_vocab_.emplace_back(token, static_cast<int32_t>(*checked));
      continue;
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        std::string raw,
        RawBytes(token, byte_level, source_ + ": model.vocab"));
    vocab.emplace_back(std::move(raw), static_cast<int32_t>(*checked));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(m["merges"].size());
  for (size_t i = 0; i < m["merges"].size(); ++i) {
    const json& item = m["merges"][i];
    std::string left, right;
    if (item.is_string()) {
      // "left right": tokens never contain a space (it is mapped or ▁).
      const std::string s = item.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos ||
          s.find(' ', space + 1) != std::string::npos) {
        return Bad(source_, absl::StrCat("model.merges[", i, "] '", s,
                                         "' is not two tokens"));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item[0].is_string() &&
               item[1].is_string()) {
      left = item[0].get<std::string>();
      right = item[1].get<std::string>();
    } else {
      return Bad(source_, absl::StrCat("model.merges[", i,
                                       "] must be \"a b\" or [\"a\", \"b\"]"));
    }
    const std::string where = absl::StrCat(source_, ": model.merges[", i, "]");
    FLOTILLA_ASSIGN_OR_RETURN(left, RawBytes(left, byte_level, where));
    FLOTILLA_ASSIGN_OR_RETURN(right, RawBytes(right, byte_level, where));
    merges.emplace_back(std::move(left), std::move(right));
  }
  HfBpeOptions options;
  options.byte_units = byte_level;
  const std::string where = source_ + ": model";
  FLOTILLA_ASSIGN_OR_RETURN(options.byte_fallback,
                            OptionalBool(m, "byte_fallback", false, where));
  FLOTILLA_ASSIGN_OR_RETURN(options.fuse_unk,
                            OptionalBool(m, "fuse_unk", false, where));
  FLOTILLA_ASSIGN_OR_RETURN(options.ignore_merges,
                            OptionalBool(m, "ignore_merges", false, where));
  const json unk = m.value("unk_token", json());
  if (!unk.is_null()) {
    if (!unk.is_string())
      return Bad(source_, "model.unk_token must be a string");
    FLOTILLA_ASSIGN_OR_RETURN(const std::string raw,
                              RawBytes(unk.get<std::string>(), byte_level,
                                       source_ + ": model.unk_token"));
    for (const auto& [token, id] : vocab) {
      if (token == raw) options.unk_id = id;
    }
    if (options.unk_id < 0) {
      return Bad(source_,
                 absl::StrCat("model.unk_token '", unk.get<std::string>(),
                              "' is not in model.vocab"));
    }
  }
  auto bpe = HfBpe::Create(std::move(vocab), merges, options);
  if (!bpe.ok()) return Bad(source_, std::string(bpe.status().message()));
  bpe_ = *std::move(bpe);
  vocab_size_ = bpe_.max_id() + 1;
  return absl::OkStatus();
}

absl::Status HfTokenizer::ParseAddedTokens(const json& doc) {
  const json list = doc.value("added_tokens", json::array());
  if (!list.is_array()) return Bad(source_, "added_tokens must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return Bad(source_, where + " needs an integer id and a string content");
    }
    const std::string content = t["content"];
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      FLOTILLA_ASSIGN_OR_RETURN(
          const bool set, OptionalBool(t, flag, false, source_ + ": " + where));
      if (set) {
        return Bad(source_, absl::StrCat(where, " ('", content, "'): ", flag,
                                         " is not supported"));
      }
    }
    auto checked = IntIn(t["id"], 0, kMaxHfTokenId, where + ".id");
    if (!checked.ok())
      return Bad(source_, std::string(checked.status().message()));
    const int32_t id = static_cast<int32_t>(*checked);
    if (absl::Status s = added_.Add(content, id); !s.ok()) {
      return Bad(source_, absl::StrCat(where, ": ", s.message()));
    }
    FLOTILLA_ASSIGN_OR_RETURN(
        const bool special,
        OptionalBool(t, "special", false, source_ + ": " + where));
    if (special) special_.insert(id);
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> HfTokenizer::TokenId(const json& value,
                                             const std::string& where) const {
  std::string content;
  if (value.is_string()) {
    content = value.get<std::string>();
  } else if (value.is_object() && value.contains("content") &&
             value["content"].is_string()) {
    content = value["content"].get<std::string>();
  } else {
    return Bad(source_, where + " must be a token string");
  }
  int32_t id = added_.IdOf(content);
  if (id < 0) id = bpe_.IdOf(content);
  if (id < 0) {
    return Bad(source_, absl::StrCat(where, ": '", content,
                                     "' is neither an added token nor in the "
                                     "vocabulary"));
  }
  return id;
}

absl::Status HfTokenizer::ParsePostProcessor(const json& doc) {
  const json pp = doc.value("post_processor", json());
  std::vector<json> steps;
  if (pp.is_object() && pp.contains("type") && pp["type"] == "Sequence" &&
      pp.contains("processors") && pp["processors"].is_array()) {
    for (const json& p : pp["processors"]) steps.push_back(p);
  } else if (!pp.is_null()) {
    steps.push_back(pp);
  }
  for (const json& p : steps) {
    const std::string type =
        p.is_object() && p.contains("type") && p["type"].is_string()
            ? p["type"].get<std::string>()
            : "";
    if (type == "ByteLevel") continue;  // offsets only; no ids
    if (type != "TemplateProcessing") {
      return Bad(source_,
                 absl::StrCat("post_processor: unsupported type '", type,
                              "' (supported: TemplateProcessing, "
                              "ByteLevel, Sequence)"));
    }
    if (!p.contains("single") || !p["single"].is_array()) {
      return Bad(source_, "post_processor.single must be an array");
    }
    bool seen_a = false;
    for (const json& item : p["single"]) {
      if (item.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      const bool named = item.contains("SpecialToken") &&
                         item["SpecialToken"].is_object() &&
                         item["SpecialToken"].contains("id") &&
                         item["SpecialToken"]["id"].is_string();
      const std::string name =
          named ? item["SpecialToken"]["id"].get<std::string>() : "";
      const json& specials = p.value("special_tokens", json::object());
      if (name.empty() || !specials.is_object() || !specials.contains(name) ||
          !specials[name].is_object() || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array()) {
        return Bad(source_, absl::StrCat("post_processor.single names special "
                                         "token '",
                                         name,
                                         "' that "
                                         "special_tokens does not define"));
      }
      for (const json& id : specials[name]["ids"]) {
        auto checked =
            IntIn(id, 0, kMaxHfTokenId, "post_processor.special_tokens ids");
        if (!checked.ok()) {
          return Bad(source_, std::string(checked.status().message()));
        }
        (seen_a ? suffix_ : prefix_).push_back(static_cast<int32_t>(*checked));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HfTokenizer::ParseConfig(absl::string_view config_json) {
  if (config_json.empty()) return absl::OkStatus();
  const std::string where = "tokenizer_config.json";
  FLOTILLA_ASSIGN_OR_RETURN(json c,
                            model::internal::ParseJson(config_json, where));
  if (!c.is_object()) return Bad(source_, where + " must be an object");
  if (c.contains("bos_token") && !c["bos_token"].is_null()) {
    FLOTILLA_ASSIGN_OR_RETURN(bos_id_,
                              TokenId(c["bos_token"], where + " bos_token"));
  }
  const auto clean = c.find("clean_up_tokenization_spaces");
  clean_up_spaces_ =
      clean != c.end() && clean->is_boolean() && clean->get<bool>();
  if (c.contains("eos_token") && !c["eos_token"].is_null()) {
    FLOTILLA_ASSIGN_OR_RETURN(eos_id_,
                              TokenId(c["eos_token"], where + " eos_token"));
  }
  return absl::OkStatus();
}

void HfTokenizer::EncodeSegment(absl::string_view segment, bool first,
                                std::vector<int32_t>* out) const {
  if (segment.empty()) return;
  for (const std::string& word :
       pipeline_.PreTokenize(pipeline_.Normalize(segment), first)) {
    bpe_.Encode(word, out);
  }
}

std::vector<int32_t> HfTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids = prefix_;
  size_t pos = 0;
  while (auto match = added_.FindFirst(text, pos)) {
    EncodeSegment(text.substr(pos, match->pos - pos), pos == 0, &ids);
    ids.push_back(match->id);
    pos = match->pos + match->length;
  }
  EncodeSegment(text.substr(pos), pos == 0, &ids);
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

absl::StatusOr<std::string> HfTokenizer::Decode(
    const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (special_.contains(id)) continue;
    if (const std::string* content = added_.ContentOf(id)) {
      tokens.push_back(*content);
      continue;
    }
    const std::string& token = bpe_.TokenOf(id);
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is not in the vocabulary of ", source_));
    }
    tokens.push_back(token);
  }
  std::string text = pipeline_.Decode(std::move(tokens));
  if (clean_up_spaces_) text = CleanUpTokenizationSpaces(text);
  return text;
}

int32_t HfTokenizer::AddedTokenId(absl::string_view content) const {
  return added_.IdOf(content);
}

std::vector<int32_t> HfTokenizer::StopIds() const {
  std::vector<int32_t> ids;
  if (eos_id_ >= 0) ids.push_back(eos_id_);
  // A generated BOS starts a new document, so the text has ended; models
  // trained on BOS-separated documents (llama2.c's TinyStories) end with it
  // rather than with EOS, and llama2.c's run.c stops there.
  if (bos_id_ >= 0 && bos_id_ != eos_id_) ids.push_back(bos_id_);
  return ids;
}

}  // namespace flotilla::tokenizer
