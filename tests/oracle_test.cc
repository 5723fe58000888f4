// tests/fixtures/k3/oracle: the reference repository's full-model gate on the
// 13-layer tiny_k3 float32 model. Required: 20/20 greedy ids and every
// teacher-forced prediction in the generated span, exactly.
#include "coordinator/families/kimi_k3/model.h"
#include "gtest/gtest.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/testing/fixture.h"
#include "shared/testing/flat_f32_source.h"

namespace flotilla::coordinator {
namespace {

using testutil::DataPath;

std::unique_ptr<K3Model> LoadOracle(int threads) {
  auto source = model::FlatF32Source::Open(DataPath("k3/oracle/tiny_k3.json"),
                                           DataPath("k3/oracle/tiny_k3.bin"));
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return nullptr;
  auto config = model::ParseK3Config((*source)->config_json(), "tiny_k3.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  ModelOptions options;
  options.threads = threads;
  auto m = K3Model::Load(std::move(*source), *config, options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

std::vector<int32_t> Ids(const nlohmann::json& j) {
  return j.get<std::vector<int32_t>>();
}

TEST(OracleTest, GreedyTwentyTokensExact) {
  const nlohmann::json ref =
      testutil::LoadJson(DataPath("k3/oracle/ref_k3.json"));
  const std::vector<int32_t> prompt = Ids(ref["prompt_ids"]);
  const std::vector<int32_t> full = Ids(ref["full_ids"]);
  for (int threads : {1, 2}) {
    std::unique_ptr<K3Model> m = LoadOracle(threads);
    ASSERT_NE(m, nullptr);
    SequenceState state = m->NewSequence();
    std::vector<float> logits;
    ASSERT_TRUE(m->Forward(&state, prompt, false, &logits).ok());
    std::vector<int32_t> got = prompt;
    const int vocab = m->config().vocab_size;
    while (got.size() < full.size()) {
      const int32_t next = testutil::ArgMax(logits.data(), vocab);
      got.push_back(next);
      if (got.size() == full.size()) break;
      ASSERT_TRUE(m->Forward(&state, {next}, false, &logits).ok());
    }
    EXPECT_EQ(got, full) << "threads " << threads;
  }
}

TEST(OracleTest, TeacherForcedPredictionsExact) {
  const nlohmann::json ref =
      testutil::LoadJson(DataPath("k3/oracle/ref_k3.json"));
  const std::vector<int32_t> prompt = Ids(ref["prompt_ids"]);
  const std::vector<int32_t> full = Ids(ref["full_ids"]);
  const std::vector<int32_t> tf = Ids(ref["tf_pred"]);
  std::unique_ptr<K3Model> m = LoadOracle(2);
  ASSERT_NE(m, nullptr);
  SequenceState state = m->NewSequence();
  std::vector<float> logits;
  ASSERT_TRUE(m->Forward(&state, full, true, &logits).ok());
  const int vocab = m->config().vocab_size;
  const std::vector<float> ref_logits =
      testutil::ReadF32File(DataPath("k3/oracle/oracle_tf_logits.f32"));
  ASSERT_EQ(ref_logits.size(), full.size() * vocab);
  for (size_t i = prompt.size() - 1; i + 1 < full.size(); ++i) {
    EXPECT_EQ(testutil::ArgMax(&logits[i * vocab], vocab), tf[i])
        << "position " << i;
  }
  const double rel = testutil::MaxRelativeError(
      logits.data(), ref_logits.data(), ref_logits.size());
  RecordProperty("tf_logits_max_rel", std::to_string(rel));
  EXPECT_LE(rel, 1.2e-7 * std::sqrt(128.0) * 50);
}

}  // namespace
}  // namespace flotilla::coordinator
