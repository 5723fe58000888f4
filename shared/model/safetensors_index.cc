#include "shared/model/safetensors_index.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/json_util.h"

namespace flotilla::model::internal {
namespace {

using json = nlohmann::json;
using ByShard = std::map<std::string, std::vector<std::string>>;

// Shard names in an index are bare file names beside it; anything that
// could reach outside the model directory is refused.
bool IsPlainRelative(const std::string& name) {
  if (name.empty()) return false;
  std::filesystem::path p(name);
  if (p.is_absolute()) return false;
  for (const std::filesystem::path& part : p) {
    if (part == "..") return false;
  }
  return true;
}

// Collects weight_map's entries; anything else in the file is skipped.
// Depth 0 is outside the top-level value, 1 inside it, 2 inside weight_map.
class WeightMapReader : public nlohmann::json_sax<json> {
 public:
  explicit WeightMapReader(ByShard* out) : out_(out) {}

  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(); }
  bool number_float(number_float_t, const string_t&) override {
    return Scalar();
  }
  bool binary(binary_t&) override { return Scalar(); }
  bool string(string_t& value) override {
    if (!in_map_ || depth_ != 2) return Scalar();
    if (value.find('\0') != std::string::npos ||
        key_.find('\0') != std::string::npos) {
      return Fail(absl::StrCat("weight_map entry '", absl::CEscape(key_),
                               "': '", absl::CEscape(value),
                               "' holds a NUL byte"));
    }
    if (!IsPlainRelative(value)) {
      return Fail(absl::StrCat("weight_map entry for '", key_,
                               "' names an unusable shard path '", value, "'"));
    }
    (*out_)[value].push_back(std::move(key_));
    ++entries_;
    return true;
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0) top_is_object_ = true;
    if (depth_ == 1 && map_key_) {
      if (saw_map_) return Fail("weight_map appears twice");
      in_map_ = saw_map_ = true;
    }
    if (in_map_ && depth_ == 2) return NotAString();
    map_key_ = false;
    return Deeper();
  }
  bool end_object() override {
    if (--depth_ == 1) in_map_ = false;
    return true;
  }
  bool start_array(std::size_t) override {
    if (in_map_ && depth_ == 2) return NotAString();
    map_key_ = false;
    return Deeper();
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) map_key_ = k == "weight_map";
    if (in_map_ && depth_ == 2) key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    syntax_ =
        absl::StrCat("invalid JSON: ", ex.what(), " (byte ", position, ")");
    return false;
  }

  // The first problem found, or empty.
  std::string Problem() const {
    if (!syntax_.empty()) return syntax_;
    if (!semantic_.empty()) return semantic_;
    if (!top_is_object_) return "not a JSON object";
    if (!saw_map_) return "missing weight_map object";
    if (entries_ == 0) return "weight_map is empty";
    return "";
  }

 private:
  bool Scalar() {
    if (in_map_ && depth_ == 2) return NotAString();
    map_key_ = false;
    return true;
  }
  bool NotAString() {
    return Fail(absl::StrCat("weight_map entry for '", key_,
                             "' is not a file name string"));
  }
  // The rest of the file is skipped, but not recursed into without bound.
  bool Deeper() {
    if (++depth_ > kMaxJsonDepth) {
      return Fail(
          absl::StrCat("nested deeper than ", kMaxJsonDepth, " levels"));
    }
    return true;
  }
  bool Fail(std::string why) {
    semantic_ = std::move(why);
    return false;  // stops the parse
  }

  ByShard* out_;
  int depth_ = 0;
  bool top_is_object_ = false;
  bool map_key_ = false;  // the value about to come is weight_map's
  bool in_map_ = false;
  bool saw_map_ = false;
  size_t entries_ = 0;
  std::string key_;
  std::string syntax_, semantic_;
};

}  // namespace

absl::StatusOr<ByShard> ReadIndexWeightMap(const std::string& index_path) {
  ByShard by_shard;
  std::string problem;
  {
    FLOTILLA_ASSIGN_OR_RETURN(const std::string text,
                              ReadSmallFile(index_path));
    WeightMapReader reader(&by_shard);
    json::sax_parse(text.data(), text.data() + text.size(), &reader,
                    json::input_format_t::json, /*strict=*/true);
    problem = reader.Problem();
  }
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", problem));
  }
  // A tensor named twice in weight_map (the last entry would silently win).
  std::vector<absl::string_view> names;
  for (const auto& [shard, tensors] : by_shard) {
    names.insert(names.end(), tensors.begin(), tensors.end());
  }
  std::sort(names.begin(), names.end());
  if (auto twice = std::adjacent_find(names.begin(), names.end());
      twice != names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": weight_map names tensor '",
                     absl::CEscape(*twice), "' twice"));
  }
  return by_shard;
}

}  // namespace flotilla::model::internal
