// The prefix cache on disk: a conversation's state survives a restart and
// its next turn prefills only its new tokens, with the same text as
// without a cache; files of another model, corrupt or cut short are never
// used.
#include <filesystem>
#include <fstream>

#include "coordinator/serve/prefix_store.h"
#include "coordinator/serve/serve_test_fixture.h"

namespace flotilla::coordinator::serve {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST_F(ServeTest, PrefixCacheOnDiskSurvivesARestart) {
  const Turns turns = ReferenceTurns();
  const std::string without = TextWithoutCache(IdsRequest(turns.second, 12));
  const std::string dir = FreshDir("prefix_store_restart");
  auto store = PrefixStore::Open(dir, "model-a", 64 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  prefix_store_ = *std::move(store);
  StartServer();
  auto [s1, b1] = Post("/v1/completions", IdsRequest(turns.first, 20));
  ASSERT_EQ(s1, 200) << b1.dump();
  TearDown();  // the restart: nothing survives but the folder
  EXPECT_EQ(prefix_store_->files(), 1u);

  store = PrefixStore::Open(dir, "model-a", 64 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  prefix_store_ = *std::move(store);
  EXPECT_EQ(prefix_store_->files(), 1u);
  StartServer();
  auto [s2, b2] = Post("/v1/completions", IdsRequest(turns.second, 12));
  ASSERT_EQ(s2, 200) << b2.dump();
  EXPECT_EQ(b2["choices"][0]["text"], without);
  // The file holds the first prompt and the 19 replies it ran: only the
  // rest of the second turn was prefilled.
  EXPECT_EQ(queue_->prefix_hits(), 1u);
  EXPECT_EQ(queue_->reused_tokens(), 5u + 19u);
}

// Issue 46 item 7 after a restart: a chat's next turn, sent to a new
// server process over the same --prefix-cache-dir, resumes from the state
// the previous turn left on disk, and its usage says so (OpenAI and
// Anthropic routes).
TEST_F(ServeTest, ChatTurnsResumeFromDiskAfterARestart) {
  for (const std::string route : {"/v1/chat/completions", "/v1/messages"}) {
    SCOPED_TRACE(route);
    const bool anthropic = route == "/v1/messages";
    const std::string dir =
        FreshDir(anthropic ? "turns_disk_a" : "turns_disk_o");
    json messages =
        json::array({{{"role", "user"}, {"content", "Once upon a time"}}});
    size_t first_prompt = 0;
    for (int turn = 0; turn < 2; ++turn) {
      auto store = PrefixStore::Open(dir, "model-a", 64 << 20);
      ASSERT_TRUE(store.ok()) << store.status();
      prefix_store_ = *std::move(store);
      StartServer();  // no memory cache: only the folder carries a state
      std::string text;
      const json reply = ChatTurn(route, messages, &text);
      ASSERT_FALSE(reply.empty());
      const auto [prompt, cached] = PromptAndCached(reply, anthropic);
      if (turn == 0) {
        EXPECT_EQ(cached, 0u);
        first_prompt = prompt;
        messages.push_back({{"role", "assistant"}, {"content", text}});
        messages.push_back({{"role", "user"}, {"content", "Then what?"}});
      } else {
        EXPECT_GE(cached, first_prompt) << "prompt " << prompt;
      }
      TearDown();  // the restart: only the folder survives
    }
  }
}

class PrefixStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = OpenStories();
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    state_ = engine_->model->StartSequence();
    std::vector<float> logits;
    ASSERT_TRUE(engine_->model->Forward(state_.get(), ids_, false, &logits).ok());
  }
  // The logits after feeding `next` to a copy of `state`.
  std::vector<float> Next(const ModelSequence& state) {
    std::unique_ptr<ModelSequence> copy = state.Clone();
    std::vector<float> logits;
    EXPECT_TRUE(engine_->model->Forward(copy.get(), {42}, false, &logits).ok());
    return logits;
  }
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ModelSequence> state_;
  const std::vector<int32_t> ids_ = {1, 100, 200, 300};
};

TEST_F(PrefixStoreTest, ALoadedStateContinuesBitwiseAsTheSavedOne) {
  const std::string dir = FreshDir("prefix_store_roundtrip");
  auto store = PrefixStore::Open(dir, "model-a", 1 << 20);
  ASSERT_TRUE(store.ok());
  (*store)->Put(ids_, *state_);
  size_t length = 0;
  std::unique_ptr<ModelSequence> loaded =
      (*store)->Find({1, 100, 200, 300, 42}, 0, *engine_->model, &length);
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(length, 4u);
  EXPECT_EQ(Next(*loaded), Next(*state_));
  // Only what is longer than what the caller holds.
  EXPECT_EQ((*store)->Find({1, 100, 200, 300, 42}, 4, *engine_->model, &length),
            nullptr);
  // The same ids again: the file's state cut back to all but the last id
  // (which must run for logits), bitwise a state fed just those.
  std::unique_ptr<ModelSequence> cut =
      (*store)->Find(ids_, 0, *engine_->model, &length);
  ASSERT_NE(cut, nullptr);
  EXPECT_EQ(length, 3u);
  std::unique_ptr<ModelSequence> three = engine_->model->StartSequence();
  std::vector<float> logits;
  ASSERT_TRUE(
      engine_->model->Forward(three.get(), {1, 100, 200}, false, &logits).ok());
  EXPECT_EQ(Next(*cut), Next(*three));
}

TEST_F(PrefixStoreTest, OtherModelsCorruptAndShortFilesAreNeverUsed) {
  const std::string dir = FreshDir("prefix_store_refusals");
  {
    auto store = PrefixStore::Open(dir, "model-a", 1 << 20);
    ASSERT_TRUE(store.ok());
    (*store)->Put(ids_, *state_);
  }
  size_t length = 0;
  const std::vector<int32_t> longer = {1, 100, 200, 300, 42};
  // Another fingerprint: not indexed, and left in place.
  auto other = PrefixStore::Open(dir, "model-b", 1 << 20);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->files(), 0u);
  EXPECT_EQ((*other)->Find(longer, 0, *engine_->model, &length), nullptr);
  std::string path;
  for (const auto& e : std::filesystem::directory_iterator(dir)) path = e.path();
  ASSERT_FALSE(path.empty());
  // One flipped byte in the state: the checksum refuses it and it goes.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-40, std::ios::end);
    f.put('\x7f');
  }
  auto store = PrefixStore::Open(dir, "model-a", 1 << 20);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->files(), 1u);
  EXPECT_EQ((*store)->Find(longer, 0, *engine_->model, &length), nullptr);
  EXPECT_EQ((*store)->files(), 0u);
  EXPECT_FALSE(std::filesystem::exists(path));
  // Cut short: never indexed as usable state.
  (*store)->Put(ids_, *state_);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  store = PrefixStore::Open(dir, "model-a", 1 << 20);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Find(longer, 0, *engine_->model, &length), nullptr);
  // A state that does not fit the model (another shape) is refused too.
  EXPECT_FALSE(engine_->model->LoadSequence("short").ok());
}

// Issue 44 item 10: a symlink loop among the entries (or as the folder
// itself) is reported and skipped, or refused by name; never an abort.
TEST_F(PrefixStoreTest, SymlinkLoopsAreSkippedOrRefusedNotFatal) {
  const std::string dir = FreshDir("prefix_store_loops");
  {
    auto store = PrefixStore::Open(dir, "model-a", 1 << 20);
    ASSERT_TRUE(store.ok());
    (*store)->Put(ids_, *state_);
  }
  std::string saved;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    saved = e.path();
  ASSERT_FALSE(saved.empty());
  const std::string suffix = saved.substr(saved.rfind('.'));
  std::filesystem::create_symlink(dir + "/b" + suffix, dir + "/a" + suffix);
  std::filesystem::create_symlink(dir + "/a" + suffix, dir + "/b" + suffix);
  auto store = PrefixStore::Open(dir, "model-a", 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->files(), 1u);
  size_t length = 0;
  EXPECT_NE((*store)->Find({1, 100, 200, 300, 42}, 0, *engine_->model, &length),
            nullptr);
  const std::string loop_dir = FreshDir("prefix_store_loop_dir");
  std::filesystem::create_directories(loop_dir);
  const std::string loop = loop_dir + "/loop";
  std::filesystem::create_symlink(loop, loop);
  auto refused = PrefixStore::Open(loop, "model-a", 1 << 20);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--prefix-cache-dir: cannot create "
                                            "or open " +
                                            loop),
            std::string::npos)
      << refused.status();
}

TEST_F(PrefixStoreTest, TheBudgetEvictsTheLeastRecentlyUsed) {
  std::string saved;
  ASSERT_TRUE(state_->Save(&saved).ok());
  const uint64_t one = saved.size() + 200;  // a file, with room for its header
  auto store = PrefixStore::Open(FreshDir("prefix_store_budget"), "m", 2 * one);
  ASSERT_TRUE(store.ok());
  (*store)->Put({1}, *state_);
  (*store)->Put({2}, *state_);
  size_t length = 0;
  ASSERT_NE((*store)->Find({1, 5}, 0, *engine_->model, &length), nullptr);
  (*store)->Put({3}, *state_);  // {2} is the least recently used now
  EXPECT_EQ((*store)->files(), 2u);
  EXPECT_LE((*store)->bytes(), 2 * one);
  EXPECT_EQ((*store)->Find({2, 5}, 0, *engine_->model, &length), nullptr);
  EXPECT_NE((*store)->Find({1, 5}, 0, *engine_->model, &length), nullptr);
}

}  // namespace
}  // namespace flotilla::coordinator::serve
