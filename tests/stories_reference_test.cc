// The embedded default model (models/stories260k-moe, an exact Mixtral
// re-expression of Karpathy's stories260K) against reference.json, whose
// ids come from Karpathy's own run.c, not from this project: for every case
// the prompt ids from tokenizer.json equal prompt_ids, and greedy decoding
// reproduces generated_ids exactly, with the experts in memory, streamed
// from the safetensors under a 1 MB budget (a few expert slots; no expert
// stays resident), streamed from a pack with no trunk layer pinned, and on
// two expert worker processes.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "coordinator/engine.h"
#include "coordinator/families/mixtral/mixtral_model.h"
#include "coordinator/generate.h"
#include "coordinator/stream/streaming_experts.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/pack/pack_manifest.h"
#include "shared/testing/faulty_reader.h"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"
#include "shared/tokenizer/tokenizer.h"
#include "tests/distributed_test_util.h"

namespace flotilla {
namespace {

std::string ModelDir() { return testutil::ModelPath("stories260k-moe"); }

nlohmann::json Reference() {
  std::ifstream in(ModelDir() + "/reference.json");
  return nlohmann::json::parse(in, nullptr, false);
}

// Greedy ids for every reference case, through an engine opened with `o`.
void ExpectReferenceIds(const coordinator::EngineOptions& o,
                        const std::string& label) {
  const nlohmann::json ref = Reference();
  ASSERT_TRUE(ref.contains("cases")) << "reference.json unreadable";
  auto tok = tokenizer::Tokenizer::LoadDir(ModelDir());
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->family, "mixtral");
  int cases = 0;
  for (const nlohmann::json& c : ref["cases"]) {
    const std::string prompt = c["prompt"];
    const std::vector<int32_t> want_prompt = c["prompt_ids"];
    const std::vector<int32_t> want = c["generated_ids"];
    EXPECT_EQ((*tok)->Encode(prompt), want_prompt) << label << " " << prompt;
    coordinator::GenerateOptions g;
    g.max_tokens = c["n_new"];  // no stop token, as run.c was driven
    auto result =
        coordinator::Generate(*(*engine)->model, want_prompt, g, nullptr);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->generated_ids, want) << label << " \"" << prompt << "\"";
    // The printed text is run.c's.
    std::vector<int32_t> all = want_prompt;
    all.insert(all.end(), want.begin(), want.end());
    auto text = (*tok)->Decode(all);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, c["text"].get<std::string>()) << prompt;
    ++cases;
  }
  EXPECT_EQ(cases, 5);
}

TEST(StoriesReferenceTest, InMemory) {
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.mem = "1G";
  ExpectReferenceIds(o, "in memory");
}

TEST(StoriesReferenceTest, StreamedFromDiskUnderOneMegabyte) {
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.mem = "1M";        // the trunk is 0.39 MB as float32, the experts 5.3 MB
  o.max_context = 64;  // 82 KB of K/V state for a short run
  {
    auto engine = coordinator::OpenEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE((*engine)->streaming);
    ASSERT_NE((*engine)->experts, nullptr);
  }
  ExpectReferenceIds(o, "streamed");
}

TEST(StoriesReferenceTest, ReadsEveryRoutedExpertFromDisk) {
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.mem = "1M";
  o.max_context = 64;  // 82 KB of K/V state for a short run
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  coordinator::GenerateOptions g;
  g.max_tokens = 8;
  auto result =
      coordinator::Generate(*(*engine)->model, {1, 403, 407}, g, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  // 8 forward passes x 5 layers x at least 2 distinct experts, each a
  // 3 x 172 x 64 float32 run: nothing is served from memory.
  EXPECT_GE((*engine)->experts->stats().bytes_read,
            8ull * 5 * 2 * 3 * 172 * 64 * 4);
}

// `flotilla-tool pack` into a fresh directory, as a user runs it.
std::string Pack(const dtest::TempDir& dir) {
  const std::string out = dir.path() + "/pack";
  const testutil::CommandResult r =
      testutil::RunCommand(testutil::BinPath("flotilla-tool") +
                               " pack --model " + ModelDir() + " --out " + out,
                           dir.path());
  EXPECT_TRUE(r.exited && r.code == 0) << r.err;
  return out;
}

TEST(StoriesReferenceTest, PackedWithNoLayerPinned) {
  dtest::TempDir tmp;
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.pack_dir = Pack(tmp);
  // Every layer through the ring, as the memory plan lays it out.
  o.max_pinned_layers = 0;
  o.max_context = 64;
  {
    auto engine = coordinator::OpenEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->plan.pinned_layers, 0);
    auto* mixtral =
        dynamic_cast<coordinator::MixtralModel*>((*engine)->model.get());
    ASSERT_NE(mixtral, nullptr);
    coordinator::GenerateOptions g;
    g.max_tokens = 4;
    ASSERT_TRUE(coordinator::Generate(*mixtral, {1, 403}, g, nullptr).ok());
    // Every forward pass read all 5 layers from the pack; the ring may have
    // read up to its slots of the next step ahead.
    const uint64_t read = mixtral->trunk()->stats().regions_read;
    EXPECT_GE(read, 4u * 5u);
    EXPECT_LE(read, 4u * 5u + (*engine)->plan.ring_slots);
  }
  ExpectReferenceIds(o, "packed, nothing pinned");
  o.max_pinned_layers = -1;  // everything pinned: the same ids
  ExpectReferenceIds(o, "packed, all pinned");
}

// One budget model: the engine opened on a pack follows the plan that
// `generate --plan` prints, charge for charge (the process baseline aside:
// each measures its own RSS).
TEST(StoriesReferenceTest, PackedEngineFollowsThePrintedPlan) {
  dtest::TempDir tmp;
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.pack_dir = Pack(tmp);
  o.max_context = 128;
  o.sequences = 3;
  for (int pinned : {0, 2, -1}) {
    SCOPED_TRACE(pinned);
    o.max_pinned_layers = pinned;
    auto printed = coordinator::PlanEngine(o);
    ASSERT_TRUE(printed.ok()) << printed.status();
    auto engine = coordinator::OpenEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const plan::MemoryPlan& used = (*engine)->plan;
    EXPECT_EQ(used.pinned_layers, pinned < 0 ? 5 : pinned);
    EXPECT_EQ(used.pinned_layers, printed->pinned_layers);
    EXPECT_EQ(used.ring_slots, printed->ring_slots);
    EXPECT_EQ(used.expert_slots, printed->expert_slots);
    EXPECT_EQ(used.expert_cache_slots, printed->expert_cache_slots);
    auto charges = [](const plan::MemoryPlan& p) {
      auto c = p.charges;
      std::erase_if(
          c, [](const auto& x) { return x.first == "process.baseline"; });
      return c;
    };
    EXPECT_EQ(charges(used), charges(*printed));
    // The budget holds 3 sequences of 128 positions: 5 layers x K and V x
    // 4 kv heads x 8 floats each.
    bool state = false;
    for (const auto& [owner, bytes] : used.charges) {
      if (owner == "sequence_state") {
        state = true;
        EXPECT_EQ(bytes, 3u * 128 * 5 * 2 * 4 * 8 * 4);
      }
    }
    EXPECT_TRUE(state);
    // And generates the reference.
    coordinator::GenerateOptions g;
    g.max_tokens = 4;
    ASSERT_TRUE(
        coordinator::Generate(*(*engine)->model, {1, 403}, g, nullptr).ok());
  }
}

// An option the family does not implement is refused by name.
TEST(StoriesReferenceTest, StreamedVocabularyIsRefused) {
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.stream_vocab = true;
  auto engine = coordinator::OpenEngine(o);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("--stream-vocab"), std::string::npos)
      << engine.status();
}

TEST(StoriesReferenceTest, DamagedPackIsAnErrorNamingTheLayer) {
  dtest::TempDir tmp;
  const std::string pack = Pack(tmp);
  {
    // Flip one byte inside layer 3's region.
    auto m = pack::LoadPackManifest(pack);
    ASSERT_TRUE(m.ok()) << m.status();
    const pack::PackRegion* r = m->FindLayer(3);
    ASSERT_NE(r, nullptr);
    std::fstream f(pack + "/trunk.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(r->offset + 100);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(r->offset + 100);
    f.write(&c, 1);
  }
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.pack_dir = pack;
  o.max_pinned_layers = 0;  // every layer read through the ring
  o.max_context = 64;
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  coordinator::GenerateOptions g;
  g.max_tokens = 2;
  auto result = coordinator::Generate(*(*engine)->model, {1, 403}, g, nullptr);
  ASSERT_FALSE(result.ok());
  // The ring every family shares names the region, the file and the offset.
  const std::string message(result.status().message());
  EXPECT_NE(message.find("checksum mismatch in trunk region layer 3"),
            std::string::npos)
      << result.status();
  EXPECT_NE(message.find("trunk.bin at offset"), std::string::npos)
      << result.status();
}

// The default model's streamed layers are read through the reader factory
// like Kimi K3's: a failed or corrupted read of trunk.bin half-way through a
// generation ends it naming the file and the offset, and once the disk is
// healed the next generation gives the same ids.
TEST(StoriesReferenceTest, TrunkReadFaultsNameTheFileAndOffset) {
  dtest::TempDir tmp;
  auto plan = std::make_shared<testutil::FaultPlan>();
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.pack_dir = Pack(tmp);
  o.max_pinned_layers = 0;  // every layer read through the ring
  o.max_context = 64;
  o.reader = "pread";
  o.reader_factory = testutil::FaultyReaderFactory(plan);
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_EQ((*engine)->plan.pinned_layers, 0);
  coordinator::GenerateOptions g;
  g.max_tokens = 4;
  auto run = [&] {
    return coordinator::Generate(*(*engine)->model, {1, 403}, g, nullptr);
  };
  auto want = run();
  ASSERT_TRUE(want.ok()) << want.status();

  testutil::Fault count;
  count.kind = testutil::FaultKind::kEio;
  count.path_contains = "trunk.bin";
  count.count = 0;  // counts the reads, hits none
  plan->Set(count);
  ASSERT_TRUE(run().ok());
  const int64_t reads = plan->seen();
  // Every step reads the 5 layers; up to a ring's worth of them (4 slots at
  // most) may have been read ahead before the count began.
  ASSERT_GE(reads, 4 * 5 - 4) << "every step reads the 5 layers";

  for (const auto& [kind, what] :
       std::vector<std::pair<testutil::FaultKind, std::string>>{
           {testutil::FaultKind::kEio, "Input/output error"},
           {testutil::FaultKind::kFlipByte, "checksum mismatch"}}) {
    SCOPED_TRACE(what);
    testutil::Fault f;
    f.kind = kind;
    f.path_contains = "trunk.bin";
    f.skip = reads / 2;
    plan->Set(f);
    auto broken = run();
    EXPECT_EQ(plan->hits(), 1);
    ASSERT_FALSE(broken.ok()) << "a " << what << " went unnoticed";
    const std::string message(broken.status().message());
    EXPECT_NE(message.find("trunk.bin"), std::string::npos) << message;
    EXPECT_NE(message.find("offset"), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
    plan->Clear();
    auto again = run();
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->generated_ids, want->generated_ids);
  }
}

TEST(StoriesReferenceTest, TwoExpertWorkers) {
  dtest::TempDir logs;
  auto fleet = dtest::StartFleet(ModelDir(), 2, 1, logs.path());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.workers = dtest::Addresses(*fleet);
  ExpectReferenceIds(o, "2 workers");
}

// Every reference prompt stepped together through ForwardBatch (prompts of
// different lengths in one step, then one token each) gives bitwise the
// logits and ids of each prompt alone.
TEST(StoriesReferenceTest, BatchedStepsEqualSoloRuns) {
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.mem = "1M";        // experts streamed: one read serves every sequence
  o.max_context = 64;  // 82 KB of K/V state for a short run
  auto engine = coordinator::OpenEngine(o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const nlohmann::json ref = Reference();
  std::vector<std::vector<int32_t>> prompts;
  for (const nlohmann::json& c : ref["cases"]) {
    prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  }
  auto ids = dtest::BatchedStepsAgainstSolo(*(*engine)->model, prompts, 30);
  ASSERT_TRUE(ids.ok()) << ids.status();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> want =
        ref["cases"][i]["generated_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ((*ids)[i], std::vector<int32_t>(want.begin(), want.begin() + 30))
        << "case " << i;
  }
}

TEST(StoriesReferenceTest, BudgetTooSmallForTheTrunkIsRefused) {
  coordinator::EngineOptions o;
  o.model_dir = ModelDir();
  o.mem = "200K";
  o.max_context = 64;  // 82 KB of K/V state for a short run
  auto engine = coordinator::OpenEngine(o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("does not fit the memory budget"),
            std::string::npos)
      << engine.status();
}

}  // namespace
}  // namespace flotilla
