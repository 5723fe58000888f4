// Speculative decoding gives exactly the tokens and logits of plain
// decoding (coordinator/speculate.h), for every family's state: Mixtral's
// KV cache (the embedded stories model), Kimi K3's recurrent state (rebuilt
// from undo records), DeepSeek-V3's latent cache (restored and replayed),
// Qwen3-MoE's and gpt-oss's caches (truncated; gpt-oss's sliding windows
// restored once trimmed). Each with the n-gram drafter, a drafter that always
// agrees (it replays the plain run) and one that never does, greedy and seeded
// top-p sampling, and through two expert workers.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/draft_model.h"
#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/speculate.h"
#include "gtest/gtest.h"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"
#include "tests/distributed_test_util.h"

namespace flotilla {
namespace {

using coordinator::Drafter;
using coordinator::GenerateOptions;
using coordinator::GenerateResult;

struct Model {
  std::string label;
  std::string dir;
  std::vector<int32_t> prompt;
  // Whether a rejected guess is dropped by truncating the state (KV and
  // DeepSeek-V3's latent caches; Kimi K3's recurrent state rebuilt from its
  // undo records), or by restoring a copy and replaying the kept tokens
  // (gpt-oss's 4-token windows once they trim).
  bool truncates;
};

std::vector<Model> Models() {
  // A prompt that repeats itself, so the n-gram drafter has guesses.
  const std::vector<int32_t> repeat = {11, 29, 37, 50, 8,  14, 11,
                                       29, 37, 50, 8,  14, 11, 29};
  return {
      {"stories", testutil::ModelPath("stories260k-moe"), repeat, true},
      {"kimi_k3", testutil::DataPath("k3/ckpt_A"), repeat, true},
      {"deepseek_v3", testutil::DataPath("deepseek-v3/ckpt_A"), repeat, true},
      {"qwen3_moe", testutil::DataPath("qwen3-moe/ckpt_A"), repeat, true},
      {"gpt_oss", testutil::DataPath("gpt-oss/ckpt_A"), repeat, false}};
}

GenerateResult Decode(coordinator::LanguageModel& model,
                      const std::vector<int32_t>& prompt, GenerateOptions o) {
  o.max_tokens = 24;
  o.keep_logits = true;
  auto r = coordinator::Generate(model, prompt, o, nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : GenerateResult();
}

void ExpectSame(const GenerateResult& plain, const GenerateResult& spec,
                const std::string& label) {
  EXPECT_EQ(spec.generated_ids, plain.generated_ids) << label;
  EXPECT_EQ(spec.logits, plain.logits) << label << ": logits not bitwise";
  EXPECT_EQ(spec.finish_reason, plain.finish_reason) << label;
}

// Every way of guessing, greedy and sampled, on one opened model.
void CheckModel(coordinator::LanguageModel& model, const Model& m) {
  for (bool sampled : {false, true}) {
    GenerateOptions o;
    if (sampled) {
      o.sampler.temperature = 0.8f;
      o.sampler.top_p = 0.9f;
      o.sampler.seed = 7;
    }
    const std::string label =
        absl::StrCat(m.label, sampled ? ", sampled" : ", greedy");
    const GenerateResult plain = Decode(model, m.prompt, o);
    std::vector<int32_t> full = m.prompt;
    full.insert(full.end(), plain.generated_ids.begin(),
                plain.generated_ids.end());
    GenerateOptions ngram = o;
    ngram.speculate = "ngram";
    ExpectSame(plain, Decode(model, m.prompt, ngram), label + ", ngram");

    GenerateOptions agree = o;
    agree.drafter = std::make_shared<coordinator::ReplayDrafter>(full, 64);
    const GenerateResult a = Decode(model, m.prompt, agree);
    ExpectSame(plain, a, label + ", always right");
    // 23 tokens after the first, 4 guesses and a fifth token per pass.
    EXPECT_EQ(a.accepted_tokens, a.drafted_tokens) << label;
    EXPECT_EQ(a.step_seconds.size(), 5u) << label;

    GenerateOptions disagree = o;
    disagree.drafter = std::make_shared<coordinator::ReplayDrafter>(full, 0);
    const GenerateResult d = Decode(model, m.prompt, disagree);
    ExpectSame(plain, d, label + ", always wrong");
    EXPECT_EQ(d.accepted_tokens, 0) << label;
    EXPECT_GT(d.drafted_tokens, 0) << label;
    EXPECT_EQ(d.replay_passes > 0, !m.truncates) << label;
    EXPECT_EQ(a.replay_passes, 0) << label;  // nothing to drop

    // Two of four guesses right: each pass keeps two (the last may have
    // room for fewer guesses).
    GenerateOptions half = o;
    half.drafter = std::make_shared<coordinator::ReplayDrafter>(full, 2);
    const GenerateResult h = Decode(model, m.prompt, half);
    ExpectSame(plain, h, label + ", two of four right");
    EXPECT_LE(h.accepted_tokens, 2 * h.speculative_passes) << label;
    EXPECT_GE(h.accepted_tokens, 2 * (h.speculative_passes - 1)) << label;
    EXPECT_LT(h.accepted_tokens, h.drafted_tokens) << label;
  }
}

TEST(SpeculativeTest, SameTokensAndLogitsAsPlainDecoding) {
  for (const Model& m : Models()) {
    SCOPED_TRACE(m.label);
    coordinator::EngineOptions o;
    o.model_dir = m.dir;
    auto engine = coordinator::OpenEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    CheckModel(*(*engine)->model, m);
  }
}

// The experts of the verifying pass (the union of its rows' experts) on two
// expert workers.
TEST(SpeculativeTest, SameThroughTwoExpertWorkers) {
  const Model m = Models()[4];  // gpt-oss
  dtest::TempDir tmp;
  const std::string pack = tmp.path() + "/pack";
  const testutil::CommandResult r = testutil::RunCommand(
      testutil::BinPath("flotilla-tool") + " pack --model " + m.dir +
          " --out " + pack + " --workers 2",
      tmp.path());
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  dtest::Fleet fleet;
  for (int k = 0; k < 2; ++k) {
    const std::string dir = absl::StrCat(pack, "/workers/worker-", k);
    auto w = dtest::WorkerProcess::Start(
        {"--model=" + dir, "--placement=" + dir + "/placement.json",
         "--threads=1", "--mem=256M"},
        absl::StrCat(tmp.path(), "/worker", k, ".log"));
    ASSERT_TRUE(w.ok()) << w.status();
    fleet.push_back(std::move(*w));
  }
  coordinator::EngineOptions o;
  o.model_dir = m.dir;
  o.workers = dtest::Addresses(fleet);
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  CheckModel(*(*engine)->model, m);
}

// A draft model (--draft-model): a copy of the model always agrees, another
// random checkpoint with the same vocabulary rarely does; the output is the
// plain one either way, greedy and sampled.
TEST(SpeculativeTest, DraftModelsGiveThePlainOutput) {
  const std::vector<Model> models = Models();
  // Target, and the other checkpoint of 512 tokens it drafts with.
  // Kimi K3 drafts for itself only (no other checkpoint of 256 tokens): its
  // draft state takes several forwards per draft, beyond one undo record.
  const std::pair<int, int> pairs[] = {{2, 3}, {3, 4}, {4, 3}, {1, 1}};
  for (const auto& [target, other] : pairs) {
    const Model& m = models[target];
    SCOPED_TRACE(m.label);
    coordinator::EngineOptions o;
    o.model_dir = m.dir;
    auto engine = coordinator::OpenEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    coordinator::LanguageModel& model = *(*engine)->model;
    for (bool sampled : {false, true}) {
      GenerateOptions g;
      if (sampled) {
        g.sampler.temperature = 0.8f;
        g.sampler.top_p = 0.9f;
        g.sampler.seed = 11;
      }
      const GenerateResult plain = Decode(model, m.prompt, g);
      for (int draft : {target, other}) {
        coordinator::EngineOptions d;
        d.model_dir = models[draft].dir;
        auto draft_engine = coordinator::OpenEngine(d);
        ASSERT_TRUE(draft_engine.ok()) << draft_engine.status();
        auto drafter = coordinator::ModelDrafter::Create(
            std::move(*draft_engine), model.vocab_size());
        ASSERT_TRUE(drafter.ok()) << drafter.status();
        coordinator::ModelDrafter* raw = drafter->get();
        GenerateOptions spec = g;
        spec.drafter = std::move(*drafter);
        const GenerateResult r = Decode(model, m.prompt, spec);
        const std::string label =
            absl::StrCat("drafted by ", models[draft].label,
                         sampled ? ", sampled" : ", greedy");
        ExpectSame(plain, r, label);
        EXPECT_TRUE(raw->status().ok()) << raw->status();
        EXPECT_GT(r.drafted_tokens, 0) << label;
        if (draft == target && !sampled) {
          EXPECT_EQ(r.accepted_tokens, r.drafted_tokens) << label;
        }
        if (draft != target) {
          EXPECT_LT(r.accepted_tokens, r.drafted_tokens / 2) << label;
        }
      }
    }
  }
  // Another vocabulary is refused.
  coordinator::EngineOptions k3;
  k3.model_dir = models[1].dir;
  auto k3_engine = coordinator::OpenEngine(k3);
  ASSERT_TRUE(k3_engine.ok()) << k3_engine.status();
  auto refused = coordinator::ModelDrafter::Create(std::move(*k3_engine), 512);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("must share the model's"),
            std::string::npos)
      << refused.status();
}

// The default drafter pauses when passes with guesses cost more per token
// than plain ones, and probes both now and then.
TEST(PayingDrafterTest, PausesWhileGuessingCostsMore) {
  auto always = std::make_shared<coordinator::ReplayDrafter>(
      std::vector<int32_t>(100, 7), 64);
  coordinator::PayingDrafter d(always);
  const std::vector<int32_t> history(10, 7);
  int guessed = 0;
  for (int pass = 1; pass <= 64; ++pass) {
    const bool guesses = !d.Draft(history, 4).empty();
    guessed += guesses ? 1 : 0;
    // Guessing: 5 tokens in 1.0 s (0.2 s each); plain: 1 token in 0.1 s.
    d.Outcome(guesses ? 4 : 0, guesses ? 5 : 1, guesses ? 1.0 : 0.1);
  }
  EXPECT_TRUE(d.paused());
  // 15 passes guessing, the 16th plain; then paused with a probe in 16.
  EXPECT_EQ(guessed, 15 + 3);
  // When guessing pays, it goes on (and keeps measuring plain now and then).
  coordinator::PayingDrafter pays(always);
  guessed = 0;
  for (int pass = 1; pass <= 64; ++pass) {
    const bool guesses = !pays.Draft(history, 4).empty();
    guessed += guesses ? 1 : 0;
    pays.Outcome(guesses ? 4 : 0, guesses ? 5 : 1, guesses ? 0.2 : 0.1);
  }
  EXPECT_FALSE(pays.paused());
  EXPECT_EQ(guessed, 64 - 4);
}

TEST(NgramDrafterTest, ContinuesTheLatestEarlierMatch) {
  coordinator::NgramDrafter d;
  // "5 6" occurred twice before; the latest is followed by 9 1.
  EXPECT_EQ(d.Draft({5, 6, 7, 8, 5, 6, 9, 1, 3, 5, 6}, 3),
            (std::vector<int32_t>{9, 1, 3}));
  EXPECT_EQ(d.Draft({5, 6, 7, 8, 5, 6, 9, 1, 3, 5, 6}, 1),
            (std::vector<int32_t>{9}));
  EXPECT_TRUE(d.Draft({1, 2, 3, 4}, 4).empty());  // nothing repeats
  EXPECT_TRUE(d.Draft({}, 4).empty());
  EXPECT_FALSE(coordinator::MakeDrafter("medusa").ok());
  EXPECT_FALSE(coordinator::MakeDrafter("replay:/nonexistent.json:2").ok());
  EXPECT_FALSE(coordinator::MakeDrafter("replay:x").ok());
}

}  // namespace
}  // namespace flotilla
