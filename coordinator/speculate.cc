#include "coordinator/speculate.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator {

std::vector<int32_t> NgramDrafter::Draft(const std::vector<int32_t>& history,
                                         int max_tokens) {
  const size_t n = history.size();
  for (int len = max_ngram_; len >= min_ngram_; --len) {
    const size_t k = static_cast<size_t>(len);
    if (n <= k) continue;
    const int32_t* suffix = history.data() + n - k;
    // The latest earlier occurrence: it is the likeliest to continue alike.
    for (size_t start = n - k; start-- > 0;) {
      if (!std::equal(suffix, suffix + k, history.data() + start)) continue;
      const size_t from = start + k;
      const size_t count = std::min<size_t>(max_tokens, n - from);
      if (count == 0) continue;
      return std::vector<int32_t>(history.begin() + from,
                                  history.begin() + from + count);
    }
  }
  return {};
}

std::vector<int32_t> ReplayDrafter::Draft(const std::vector<int32_t>& history,
                                          int max_tokens) {
  if (history.size() >= record_.size() ||
      !std::equal(history.begin(), history.end(), record_.begin())) {
    return {};
  }
  std::vector<int32_t> out;
  for (size_t i = history.size();
       i < record_.size() && out.size() < static_cast<size_t>(max_tokens);
       ++i) {
    const int32_t id = record_[i];
    // A wrong guess: a different token that is still in the vocabulary.
    const int32_t wrong = id == 0 ? 1 : id - 1;
    out.push_back(static_cast<int>(out.size()) < right_ ? id : wrong);
  }
  return out;
}

std::vector<int32_t> PayingDrafter::Draft(const std::vector<int32_t>& history,
                                          int max_tokens) {
  ++passes_;
  // While drafting, one pass in 16 is plain (what plain costs now); while
  // paused, one in 16 guesses again (whether guessing pays now).
  const bool probe = passes_ % 16 == 0;
  if (paused_ != probe) return {};
  return inner_->Draft(history, max_tokens);
}

void PayingDrafter::Outcome(int drafted, int produced, double seconds) {
  inner_->Outcome(drafted, produced, seconds);
  if (produced <= 0) return;
  const double per_token = seconds / produced;
  double& average = drafted > 0 ? guessing_ : plain_;
  average = average < 0 ? per_token : 0.75 * average + 0.25 * per_token;
  if (guessing_ >= 0 && plain_ >= 0) paused_ = guessing_ > plain_;
}

namespace {

absl::StatusOr<std::unique_ptr<Drafter>> ReplayFrom(const std::string& spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  int right = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &right) || right < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--speculate ", spec, ": expected replay:FILE:K (K >= 0)"));
  }
  std::ifstream in(parts[1]);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json run = nlohmann::json::parse(text.str(), nullptr, false);
  if (!in || run.is_discarded() || !run.is_object() ||
      !run.contains("prompt_ids") || !run.contains("generated_ids") ||
      !run["prompt_ids"].is_array() || !run["generated_ids"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--speculate ", spec, ": ", parts[1],
        " is not a `generate --json` output (prompt_ids, generated_ids)"));
  }
  std::vector<int32_t> record;
  for (const char* key : {"prompt_ids", "generated_ids"}) {
    for (const nlohmann::json& id : run[key]) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--speculate ", spec, ": ", parts[1], " has a non-integer id"));
      }
      record.push_back(id.get<int32_t>());
    }
  }
  return std::unique_ptr<Drafter>(new ReplayDrafter(std::move(record), right));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Drafter>> MakeDrafter(const std::string& name,
                                                     bool pay_check) {
  if (name == "ngram") {
    if (!pay_check) return std::unique_ptr<Drafter>(new NgramDrafter());
    return std::unique_ptr<Drafter>(
        new PayingDrafter(std::make_shared<NgramDrafter>()));
  }
  if (absl::StartsWith(name, "replay:")) return ReplayFrom(name);
  return absl::InvalidArgumentError(
      absl::StrCat("--speculate: unknown drafter '", name,
                   "' (known: ngram; benches: replay:FILE:K)"));
}

}  // namespace flotilla::coordinator
