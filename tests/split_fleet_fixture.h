// The fixture of the split-fleet tests (distributed_split_test.cc,
// distributed_split_refusal_test.cc): a synthetic model whose intermediate
// size (96) differs from its latent width (64), so the two slice dimensions
// cannot be confused; `flotilla-tool pack --workers N --split` folders; and
// slice workers started on them.
#ifndef FLOTILLA_TESTS_SPLIT_FLEET_FIXTURE_H_
#define FLOTILLA_TESTS_SPLIT_FLEET_FIXTURE_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/distributed_test_util.h"

namespace flotilla::dtest {

class SplitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    // ckpt_A's config with a wider expert FFN (I = 96, L = 64).
    std::ifstream in(CkptA() + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(config.is_discarded());
    config["moe_intermediate_size"] = 96;
    const std::string config_path = dir_->path() + "/wide_config.json";
    std::ofstream(config_path) << config.dump(1);
    wide_ = dir_->path() + "/wide";
    std::string out;
    ASSERT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                                      " synth --buffered --seed 5 --config ",
                                      config_path, " --out ", wide_),
                         &out),
              0)
        << out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // `pack --workers n --split` of `model` (once per model and n); returns
  // the folder holding worker-0 .. worker-(n-1).
  static std::string SplitPack(const std::string& model, int n) {
    const std::string pack = absl::StrCat(
        dir_->path(), "/split_", model == CkptA() ? "a" : "wide", "_", n);
    std::string out;
    EXPECT_EQ(RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                                      " pack --model ", model, " --out ", pack,
                                      " --workers ", n, " --split"),
                         &out),
              0)
        << out;
    return pack + "/workers";
  }

  // Worker k of the split pack in `workers_dir`.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> StartSliceWorker(
      const std::string& workers_dir, int k,
      const std::vector<std::string>& extra = {}, int port = 0) {
    const std::string folder = absl::StrCat(workers_dir, "/worker-", k);
    std::vector<std::string> args = {
        "--model=" + folder, "--split=" + folder + "/split.json", "--threads=1",
        "--mem=256M", "--fetch-slots=4"};
    args.insert(args.end(), extra.begin(), extra.end());
    return WorkerProcess::Start(
        args, absl::StrCat(workers_dir, "/worker", k, "_", port, ".log"), port);
  }

  static absl::StatusOr<Fleet> StartSplitFleet(
      const std::string& workers_dir, int n,
      const std::vector<std::string>& extra = {}) {
    Fleet fleet;
    for (int k = 0; k < n; ++k) {
      auto w = StartSliceWorker(workers_dir, k, extra);
      if (!w.ok()) return w.status();
      fleet.push_back(std::move(*w));
    }
    return fleet;
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::string wide_;
};

}  // namespace flotilla::dtest

#endif  // FLOTILLA_TESTS_SPLIT_FLEET_FIXTURE_H_
