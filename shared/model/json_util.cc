#include "shared/model/json_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/io/file.h"

namespace flotilla::model::internal {
namespace {

using json = nlohmann::json;

// A SAX consumer that accepts everything and remembers the first error.
// Used only to explain a failed parse: the DOM parser with exceptions off
// says that it failed but not where.
class ErrorRecorder : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    message_ = absl::StrCat(ex.what(), " (byte ", position, ")");
    return false;
  }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// A SAX pass that refuses what the DOM parser would take quietly: nesting
// deeper than kMaxJsonDepth, and a key repeated within one object.
class JsonGuard : public ErrorRecorder {
 public:
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return Deeper();
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return Deeper(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.empty() && !keys_.back().insert(k).second) {
      problem_ =
          absl::StrCat("duplicate key \"", k.substr(0, 80), "\" in one object");
      return false;
    }
    return true;
  }
  const std::string& problem() const { return problem_; }

 private:
  bool Deeper() {
    if (++depth_ > kMaxJsonDepth) {
      problem_ = absl::StrCat("nested deeper than ", kMaxJsonDepth, " levels");
      return false;
    }
    return true;
  }
  int depth_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;
  std::string problem_;
};

template <typename Json>
absl::StatusOr<Json> ParseGuarded(absl::string_view text,
                                  absl::string_view source) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  // nlohmann's lexer takes a NUL byte for the end of its input and would
  // ignore whatever follows it; JSON text never holds one (a NUL inside a
  // string is written \u0000).
  if (const size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid JSON: a NUL byte at offset ", nul));
  }
  {
    JsonGuard guard;
    json::sax_parse(begin, end, &guard, json::input_format_t::json,
                    /*strict=*/true);
    if (!guard.problem().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": refused JSON: ", guard.problem()));
    }
  }
  Json parsed = Json::parse(begin, end, nullptr,
                            /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) return parsed;
  ErrorRecorder recorder;
  json::sax_parse(begin, end, &recorder, json::input_format_t::json,
                  /*strict=*/true);
  std::string reason = recorder.message().empty() ? std::string("parse error")
                                                  : recorder.message();
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": invalid JSON: ", reason));
}

}  // namespace

absl::StatusOr<json> ParseJson(absl::string_view text,
                               absl::string_view source) {
  return ParseGuarded<json>(text, source);
}

absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(
    absl::string_view text, absl::string_view source) {
  return ParseGuarded<nlohmann::ordered_json>(text, source);
}

std::string DescribeJson(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  FLOTILLA_ASSIGN_OR_RETURN(io::File file, io::File::OpenRegular(path));
  // Configs and indexes are kilobytes to a few tens of megabytes (a
  // 500k-entry weight_map); anything far larger is not one of them.
  constexpr uint64_t kMaxBytes = uint64_t{1} << 30;
  if (file.size() > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", file.size(), " bytes is too large for a JSON file"));
  }
  std::string text(file.size(), '\0');
  FLOTILLA_RETURN_IF_ERROR(file.ReadExact(0, text.data(), text.size(), ""));
  return text;
}

}  // namespace flotilla::model::internal
