// The families' reference checkpoints (tests/fixtures/<family>/ckpt_A: tiny
// random checkpoints in the release layouts, with reference outputs of
// Hugging Face's own modeling code in float32; see each README) through
// every way the engine runs a model: the greedy ids exactly, and the step
// logits (one per generated token) and the teacher-forced logits over
// prompt + generation within the README's tolerance -- in memory, streamed
// from a pack with no trunk layer pinned, on two expert workers (`pack
// --workers 2`), and from the checkpoint re-split into two shards that cut
// through every layer. DeepSeek-V3's FP8 checkpoint, dequantised to F32,
// gives bitwise the FP8 run's logits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "coordinator/engine.h"
#include "coordinator/generate.h"
#include "coordinator/model/layer_source.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/kernels/fp8.h"
#include "shared/model/safetensors.h"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"
#include "tests/checkpoint_rewrite.h"
#include "tests/distributed_test_util.h"

namespace flotilla {
namespace {

constexpr int kVocab = 512;  // every fixture's

struct Fixture {
  const char* dir;     // under tests/fixtures
  const char* family;  // the registry's name
  double tolerance;    // max |dlogit|, the README's suggested bound
};

// The fixture the running test is about (set by each TEST_P).
const Fixture* current = nullptr;

std::string CkptDir() { return testutil::DataPath(current->dir); }

struct Reference {
  std::vector<int32_t> prompt, generated, full;
  std::vector<float> step_logits;  // [generated][vocab]
  std::vector<float> tf_logits;    // [full][vocab]
};

const Reference& Ref() {
  static std::map<std::string, Reference>* refs =
      new std::map<std::string, Reference>;
  auto it = refs->find(current->dir);
  if (it != refs->end()) return it->second;
  {
    Reference* r = &(*refs)[current->dir];
    const nlohmann::json j = testutil::LoadJson(CkptDir() + "/ref/ref.json");
    r->prompt = j["prompt_ids"].get<std::vector<int32_t>>();
    r->generated = j["generated_ids"].get<std::vector<int32_t>>();
    r->full = r->prompt;
    r->full.insert(r->full.end(), r->generated.begin(), r->generated.end());
    r->step_logits = testutil::ReadF32File(CkptDir() + "/ref/step_logits.f32");
    r->tf_logits = testutil::ReadF32File(CkptDir() + "/ref/tf_logits.f32");
  }
  return (*refs)[current->dir];
}

double MaxAbs(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

// The model's outputs for the reference prompt: greedy generation with its
// step logits, then one forward over every id (teacher forcing).
struct ModelRun {
  std::vector<int32_t> generated;
  std::vector<float> step_logits, tf_logits;
};

ModelRun RunModel(coordinator::LanguageModel& model) {
  const Reference& ref = Ref();
  ModelRun run;
  coordinator::GenerateOptions g;
  g.max_tokens = static_cast<int>(ref.generated.size());
  g.keep_logits = true;
  auto result = coordinator::Generate(model, ref.prompt, g, nullptr);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return run;
  run.generated = result->generated_ids;
  run.step_logits = result->logits;
  auto seq = model.StartSequence();
  absl::Status s = model.Forward(seq.get(), ref.full, true, &run.tf_logits);
  EXPECT_TRUE(s.ok()) << s;
  return run;
}

void ExpectReference(const ModelRun& run, const std::string& label) {
  const Reference& ref = Ref();
  EXPECT_EQ(run.generated, ref.generated) << label;
  const double step = MaxAbs(run.step_logits, ref.step_logits);
  const double tf = MaxAbs(run.tf_logits, ref.tf_logits);
  EXPECT_LE(step, current->tolerance) << label << ": step logits";
  EXPECT_LE(tf, current->tolerance) << label << ": teacher-forced logits";
  // The teacher-forced argmax over the generated span is the generation.
  for (size_t i = ref.prompt.size() - 1; i + 1 < ref.full.size(); ++i) {
    if (run.tf_logits.size() < (i + 1) * kVocab) break;
    EXPECT_EQ(testutil::ArgMax(run.tf_logits.data() + i * kVocab, kVocab),
              ref.full[i + 1])
        << label << " position " << i;
  }
  std::printf("%s %s: step max |dlogit| %.3g, teacher-forced %.3g\n",
              current->dir, label.c_str(), step, tf);
}

ModelRun OpenAndRun(const coordinator::EngineOptions& o,
                    const std::string& label) {
  auto engine = coordinator::OpenEngine(o);
  EXPECT_TRUE(engine.ok()) << label << ": " << engine.status();
  if (!engine.ok()) return {};
  EXPECT_EQ((*engine)->family, current->family);
  return RunModel(*(*engine)->model);
}

class FamilyReferenceTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override { current = &GetParam(); }
};

TEST_P(FamilyReferenceTest, InMemory) {
  coordinator::EngineOptions o;
  o.model_dir = CkptDir();
  o.mem = "1G";
  ExpectReference(OpenAndRun(o, "in memory"), "in memory");
}

std::string Pack(const dtest::TempDir& dir, const std::string& model,
                 const std::string& extra = "") {
  const std::string out = dir.path() + "/pack";
  const testutil::CommandResult r = testutil::RunCommand(
      testutil::BinPath("flotilla-tool") + " pack --model " + model +
          " --out " + out + extra,
      dir.path());
  EXPECT_TRUE(r.exited && r.code == 0) << r.err;
  return out;
}

TEST_P(FamilyReferenceTest, PackedWithNoLayerPinned) {
  dtest::TempDir tmp;
  coordinator::EngineOptions o;
  o.model_dir = CkptDir();
  o.pack_dir = Pack(tmp, CkptDir());
  o.max_pinned_layers = 0;  // every layer through the ring
  o.max_context = 64;
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->plan.pinned_layers, 0);
  EXPECT_TRUE((*engine)->streaming);
  ASSERT_NE((*engine)->trunk_layers, nullptr);
  const ModelRun run = RunModel(*(*engine)->model);
  ExpectReference(run, "packed, nothing pinned");
  // 16 generation steps and the teacher-forced pass, each reading the 4
  // layers from the pack (the ring may have read ahead a few).
  EXPECT_GE((*engine)->trunk_layers->stats().regions_read, 17u * 4u);
}

// Starts one worker on each of `pack`'s two worker folders: each holds the
// experts its placement.json names, or (`split`) its split.json's rows.
void StartWorkers(const dtest::TempDir& tmp, const std::string& pack,
                  bool split, dtest::Fleet* fleet) {
  for (int k = 0; k < 2; ++k) {
    const std::string dir = absl::StrCat(pack, "/workers/worker-", k);
    auto w = dtest::WorkerProcess::Start(
        {"--model=" + dir,
         split ? "--split=" + dir + "/split.json"
               : "--placement=" + dir + "/placement.json",
         "--threads=1", "--mem=256M"},
        absl::StrCat(tmp.path(), "/worker", k, ".log"));
    ASSERT_TRUE(w.ok()) << w.status();
    fleet->push_back(std::move(*w));
  }
}

TEST_P(FamilyReferenceTest, TwoExpertWorkers) {
  dtest::TempDir tmp;
  const std::string pack = Pack(tmp, CkptDir(), " --workers 2");
  dtest::Fleet fleet;
  ASSERT_NO_FATAL_FAILURE(StartWorkers(tmp, pack, /*split=*/false, &fleet));
  coordinator::EngineOptions o;
  o.model_dir = CkptDir();
  o.workers = dtest::Addresses(fleet);
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ExpectReference(RunModel(*(*engine)->model), "2 expert workers");
}

// Two shards that split every layer: tensors alternate between the files in
// name order, so each layer's projections, their scales and each expert's
// matrices land in both.
TEST_P(FamilyReferenceTest, ResplitIntoTwoShardsGivesTheSameLogits) {
  dtest::TempDir tmp;
  const std::string dir = tmp.path() + "/resplit";
  int next = 0;
  testutil::RewriteOptions ro;
  ro.shards = 2;
  ro.edit = [&next](const model::TensorInfo&, testutil::TensorFate* f) {
    f->shard = next++ % 2;
  };
  ASSERT_TRUE(testutil::RewriteCheckpoint(CkptDir(), dir, ro).ok());
  coordinator::EngineOptions a;
  a.model_dir = CkptDir();
  coordinator::EngineOptions b = a;
  b.model_dir = dir;
  const ModelRun one = OpenAndRun(a, "one shard");
  const ModelRun two = OpenAndRun(b, "two shards");
  ExpectReference(two, "two shards");
  EXPECT_EQ(two.step_logits, one.step_logits);
  EXPECT_EQ(two.tf_logits, one.tf_logits);
  // And packed from the two shards.
  coordinator::EngineOptions p = b;
  p.pack_dir = Pack(tmp, dir);
  p.max_pinned_layers = 0;
  p.max_context = 64;
  const ModelRun packed = OpenAndRun(p, "two shards, packed");
  EXPECT_EQ(packed.tf_logits, one.tf_logits);
}

// A sequence saved after the prompt and loaded back (the prefix store's
// path) continues to bitwise the same logits; bytes of another shape are
// refused by the header check, never read.
// The fixture's engine with default options (all in memory).
absl::StatusOr<std::unique_ptr<coordinator::Engine>> OpenFixture() {
  coordinator::EngineOptions o;
  o.model_dir = CkptDir();
  return coordinator::OpenEngine(o);
}

TEST_P(FamilyReferenceTest, SavedSequenceLoadsAndContinuesBitwise) {
  auto engine = OpenFixture();
  ASSERT_TRUE(engine.ok()) << engine.status();
  coordinator::LanguageModel& m = *(*engine)->model;
  const Reference& ref = Ref();
  auto seq = m.StartSequence();
  std::vector<float> logits;
  ASSERT_TRUE(m.Forward(seq.get(), ref.prompt, false, &logits).ok());
  std::string bytes;
  ASSERT_TRUE(seq->Save(&bytes).ok());
  auto loaded = m.LoadSequence(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<int32_t> next = {ref.generated[0]};
  std::vector<float> a, b;
  ASSERT_TRUE(m.Forward(seq.get(), next, false, &a).ok());
  ASSERT_TRUE(m.Forward(loaded->get(), next, false, &b).ok());
  EXPECT_EQ(a, b);
  std::string wrong = bytes;
  wrong[8] = static_cast<char>(wrong[8] + 1);  // one more layer
  auto refused = m.LoadSequence(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("do not fit this model"),
            std::string::npos)
      << refused.status();
  EXPECT_FALSE(m.LoadSequence(bytes.substr(0, bytes.size() - 3)).ok());
}

TEST_P(FamilyReferenceTest, BatchedStepsEqualSoloRuns) {
  // One step projects every sequence's rows together and attends per
  // sequence: each sequence's logits must be bitwise its solo run's, for
  // prompts of different lengths.
  auto engine = OpenFixture();
  ASSERT_TRUE(engine.ok()) << engine.status();
  const Reference& ref = Ref();
  auto ids = dtest::BatchedStepsAgainstSolo(
      *(*engine)->model,
      {ref.prompt, {ref.full[0]}, {ref.full.begin(), ref.full.begin() + 3}}, 4);
  ASSERT_TRUE(ids.ok()) << ids.status();
  // The sequence given the reference prompt generates the reference ids.
  EXPECT_EQ((*ids)[0], std::vector<int32_t>(ref.generated.begin(),
                                            ref.generated.begin() + 4));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FamilyReferenceTest,
    ::testing::Values(Fixture{"deepseek-v3/ckpt_A", "deepseek_v3", 3e-5},
                      Fixture{"qwen3-moe/ckpt_A", "qwen3_moe", 2e-5},
                      Fixture{"gpt-oss/ckpt_A", "gpt_oss", 2e-5}),
    [](const ::testing::TestParamInfo<Fixture>& info) {
      return std::string(info.param.family);
    });

const Fixture kDeepSeekV3{"deepseek-v3/ckpt_A", "deepseek_v3", 3e-5};

// The same weights without FP8: every F8_E4M3 tensor dequantised to F32
// (its scale_inv dropped) and no quantization_config, as a user's own
// conversion would hold them. MatMulFp8 equals MatMul on the dequantised
// matrix bit for bit, so the dense path must give exactly the FP8 logits.
TEST(DeepSeekV3ReferenceTest, DequantisedCopyGivesBitwiseTheSameLogits) {
  current = &kDeepSeekV3;
  auto source = model::SafetensorsCheckpoint::OpenDir(CkptDir());
  ASSERT_TRUE(source.ok()) << source.status();
  nlohmann::json config = testutil::LoadJson(CkptDir() + "/config.json");
  config.erase("quantization_config");
  testutil::RewriteOptions ro;
  ro.config_json = config.dump();
  ro.edit = [&](const model::TensorInfo& t, testutil::TensorFate* f) {
    if (absl::EndsWith(t.name, "_scale_inv")) {
      f->shard = -1;
      return;
    }
    if (t.dtype != model::DType::kF8E4M3) return;
    const model::TensorInfo* scale = (*source)->Find(t.name + "_scale_inv");
    ASSERT_NE(scale, nullptr) << t.name;
    std::vector<float> scales(scale->numel());
    ASSERT_TRUE((*source)->ReadRaw(*scale, scales.data()).ok());
    const kernels::Fp8BlockMatrix m{f->bytes.data(), scales.data(),
                                    static_cast<size_t>(t.shape[0]),
                                    static_cast<size_t>(t.shape[1])};
    std::vector<float> values(m.rows * m.cols);
    ASSERT_TRUE(kernels::DequantizeFp8Rows(m, 0, m.rows, values.data()).ok());
    f->dtype = model::DType::kF32;
    f->bytes.resize(values.size() * sizeof(float));
    std::memcpy(f->bytes.data(), values.data(), f->bytes.size());
  };
  dtest::TempDir tmp;
  const std::string dir = tmp.path() + "/f32";
  ASSERT_TRUE(testutil::RewriteCheckpoint(CkptDir(), dir, ro).ok());
  coordinator::EngineOptions a;
  a.model_dir = CkptDir();
  coordinator::EngineOptions b = a;
  b.model_dir = dir;
  const ModelRun fp8 = OpenAndRun(a, "fp8");
  const ModelRun f32 = OpenAndRun(b, "dequantised f32");
  EXPECT_EQ(f32.generated, fp8.generated);
  EXPECT_EQ(f32.step_logits, fp8.step_logits);
  EXPECT_EQ(f32.tf_logits, fp8.tf_logits);
}

// A head_dim that, times the heads, disagrees with the tensors is refused by
// the engine and by pack, naming the tensor whose shape does not fit.
TEST(Qwen3MoeReferenceTest, HeadDimDisagreeingWithTheTensorsIsRefused) {
  const Fixture qwen{"qwen3-moe/ckpt_A", "qwen3_moe", 2e-5};
  current = &qwen;
  nlohmann::json config = testutil::LoadJson(CkptDir() + "/config.json");
  config["head_dim"] = 16;  // q_proj is [4 x 32, 64] in the checkpoint
  testutil::RewriteOptions ro;
  ro.config_json = config.dump();
  dtest::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  ASSERT_TRUE(testutil::RewriteCheckpoint(CkptDir(), dir, ro).ok());
  coordinator::EngineOptions o;
  o.model_dir = dir;
  auto engine = coordinator::OpenEngine(o);
  ASSERT_FALSE(engine.ok());
  const std::string want = "tensor model.layers.0.self_attn.q_proj.weight in ";
  EXPECT_NE(engine.status().message().find(want), std::string::npos)
      << engine.status();
  EXPECT_NE(engine.status().message().find("expected [64,64]"),
            std::string::npos)
      << engine.status();
  const testutil::CommandResult r = testutil::RunCommand(
      testutil::BinPath("flotilla-tool") + " pack --model " + dir + " --out " +
          tmp.path() + "/pack",
      tmp.path());
  EXPECT_TRUE(r.exited && r.code != 0);
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
}

// gpt-oss's experts cut into row slices (`pack --workers 2 --split`): each
// worker holds half the rows of every expert, and of its biases; the
// assembled outputs are bitwise the single process's.
TEST(GptOssReferenceTest, SplitWorkersGiveTheInMemoryLogitsBitwise) {
  const Fixture gpt_oss{"gpt-oss/ckpt_A", "gpt_oss", 2e-5};
  current = &gpt_oss;
  coordinator::EngineOptions local;
  local.model_dir = CkptDir();
  const ModelRun want = OpenAndRun(local, "in memory");
  dtest::TempDir tmp;
  const std::string pack = Pack(tmp, CkptDir(), " --workers 2 --split");
  dtest::Fleet fleet;
  ASSERT_NO_FATAL_FAILURE(StartWorkers(tmp, pack, /*split=*/true, &fleet));
  coordinator::EngineOptions o;
  o.model_dir = CkptDir();
  o.workers = dtest::Addresses(fleet);
  const ModelRun got = OpenAndRun(o, "2 split workers");
  ExpectReference(got, "2 split workers");
  EXPECT_EQ(got.step_logits, want.step_logits);
  EXPECT_EQ(got.tf_logits, want.tf_logits);
}

}  // namespace
}  // namespace flotilla
