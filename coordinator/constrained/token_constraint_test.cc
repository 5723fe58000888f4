// JsonConstraint::Mask's walk over the pieces in byte order gives, at every
// state of a reply, the mask of feeding each token's piece to the matcher
// alone (what Mask did before): compared on the stories tokenizer and on
// o200k (199,998 tokens) over random replies of two schemas.
#include "coordinator/constrained/token_constraint.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::constrained {
namespace {

// The mask's verdicts the direct way: each piece fed alone.
std::vector<char> DirectMask(const JsonMatcher& matcher,
                             const TokenPieces& pieces, int vocab,
                             int remaining) {
  const int64_t after = std::max(0, remaining - 1);
  std::vector<char> allowed(vocab, 0);
  std::vector<int32_t> over;
  bool within = false, valid = false;
  for (int32_t id = 0; id < vocab; ++id) {
    const std::string& p = pieces.piece(id);
    if (p.empty()) continue;
    JsonMatcher m = matcher;
    if (!m.FeedAll(p)) continue;
    valid = true;
    if (m.MinBytesToEnd() <= after) {
      allowed[id] = 1;
      within = true;
    } else {
      over.push_back(id);
    }
  }
  if (!within) {
    for (int32_t id : over) allowed[id] = 1;
  }
  if (matcher.CanEnd() || !valid) {
    for (int32_t id : pieces.stop_ids()) allowed[id] = 1;
  }
  return allowed;
}

void Compare(const std::string& tokenizer_dir, int steps) {
  auto tok = tokenizer::Tokenizer::LoadDir(tokenizer_dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto pieces = TokenPieces::Build(**tok);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  const int vocab = (*pieces)->vocab_size();
  for (
      const char* text :
      {R"({"type":"object","properties":{"name":{"type":"string","maxLength":9},
            "age":{"type":"integer","minimum":0,"maximum":150},
            "tags":{"type":"array","items":{"enum":["a","bc",3]}}},
            "required":["name","age","tags"],"additionalProperties":false})",
       R"({"type":"array","items":{"type":["number","null","boolean"]}})"}) {
    auto schema = CompiledSchema::Compile(nlohmann::ordered_json::parse(text));
    ASSERT_TRUE(schema.ok()) << schema.status();
    auto shared = std::make_shared<const CompiledSchema>(*std::move(schema));
    JsonConstraint constraint(shared, *pieces);
    JsonMatcher mirror(shared.get());
    std::mt19937 rng(11);
    int taken = 0;
    for (int step = 0; step < steps && !mirror.Done(); ++step) {
      const int remaining = 40 - step;
      std::vector<float> logits(vocab, 0.0f);
      constraint.Mask(logits.data(), vocab, remaining);
      const std::vector<char> want =
          DirectMask(mirror, **pieces, vocab, remaining);
      std::vector<int32_t> allowed;
      for (int id = 0; id < vocab; ++id) {
        ASSERT_EQ(std::isinf(logits[id]), want[id] == 0)
            << "step " << step << " token " << id << " '"
            << (*pieces)->piece(id) << "'";
        if (want[id] && !(*pieces)->piece(id).empty()) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      constraint.Accept(pick);
      ASSERT_TRUE(mirror.FeedAll((*pieces)->piece(pick)));
      ++taken;
    }
    // The comparison ran through a reply, not one step.
    EXPECT_TRUE(taken >= std::min(steps, 5) || mirror.Done())
        << taken << " steps: " << text;
  }
}

TEST(TokenConstraintTest, TheSortedWalkMasksAsEachTokenAlone) {
  Compare(FLOTILLA_STORIES_DIR, 40);
}

TEST(TokenConstraintTest, TheSortedWalkMasksAsEachTokenAloneAt200k) {
  Compare(FLOTILLA_O200K_DIR, 6);
}

}  // namespace
}  // namespace flotilla::coordinator::constrained
