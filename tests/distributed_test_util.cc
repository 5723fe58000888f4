#include "tests/distributed_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/families/kimi_k3/trunk.h"
#include "shared/base/status_macros.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"

extern char** environ;

namespace flotilla::dtest {
namespace fs = std::filesystem;

std::string BinPath(const std::string& name) {
  return std::string(FLOTILLA_BIN_DIR) + "/" + name;
}

std::string CkptA() {
  return std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = (fs::temp_directory_path() /
           absl::StrCat("flotilla_dist_", getpid(), "_", rd()))
              .string();
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(
    const std::vector<std::string>& args, const std::string& log_path,
    int port) {
  const std::string bin = BinPath("flotilla-expert-worker");
  std::vector<std::string> all = {bin, "--host=127.0.0.1",
                                  absl::StrCat("--port=", port)};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  auto w = std::unique_ptr<WorkerProcess>(new WorkerProcess());
  w->log_path_ = log_path;
  const int err = posix_spawn(&w->pid_, bin.c_str(), &actions, nullptr,
                              argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    w->pid_ = -1;
    return absl::InternalError(absl::StrCat("cannot start ", bin));
  }
  const std::string marker = "listening on 127.0.0.1:";
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string log = w->Log();
    const size_t at = log.find(marker);
    if (at != std::string::npos) {
      const size_t end =
          log.find_first_not_of("0123456789", at + marker.size());
      if (end != std::string::npos &&
          absl::SimpleAtoi(
              log.substr(at + marker.size(), end - at - marker.size()),
              &w->port_)) {
        return w;
      }
    }
    int status = 0;
    if (waitpid(w->pid_, &status, WNOHANG) == w->pid_) {
      w->pid_ = -1;
      return absl::InternalError(
          absl::StrCat("worker exited before serving:\n", log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("worker did not start in 60 s:\n", w->Log()));
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) Signal(SIGKILL);
}

std::string WorkerProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

void WorkerProcess::Signal(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  if (sig == SIGKILL || sig == SIGTERM) {
    if (sig == SIGTERM) kill(pid_, SIGCONT);  // in case it was stopped
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

std::string WorkerProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

absl::StatusOr<Fleet> StartFleet(const std::string& model, int n, int r,
                                 const std::string& log_dir,
                                 const std::vector<std::string>& extra) {
  Fleet fleet;
  for (int k = 0; k < n; ++k) {
    std::vector<std::string> args = {"--model=" + model,
                                     absl::StrCat("--shard=", k, "/", n),
                                     absl::StrCat("--replicas=", r),
                                     "--threads=1",
                                     "--mem=256M",
                                     "--fetch-slots=4"};
    args.insert(args.end(), extra.begin(), extra.end());
    FLOTILLA_ASSIGN_OR_RETURN(
        auto w, WorkerProcess::Start(args, absl::StrCat(log_dir, "/worker", k,
                                                        "of", n, ".log")));
    fleet.push_back(std::move(w));
  }
  return fleet;
}

std::vector<std::string> Addresses(const Fleet& fleet) {
  std::vector<std::string> out;
  for (const auto& w : fleet) out.push_back(w->address());
  return out;
}

absl::StatusOr<Generation> GenerateWith(
    coordinator::K3Model& model, const std::vector<int32_t>& prompt,
    int max_tokens, const coordinator::TokenCallback& on_token) {
  coordinator::GenerateOptions options;
  options.max_tokens = max_tokens;
  options.keep_logits = true;
  FLOTILLA_ASSIGN_OR_RETURN(
      coordinator::GenerateResult r,
      coordinator::Generate(
          model, prompt, options,
          on_token ? on_token : [](int32_t) { return true; }));
  return Generation{r.generated_ids, r.logits};
}

absl::StatusOr<Generation> GenerateWhenBack(coordinator::K3Model& model,
                                            const std::vector<int32_t>& prompt,
                                            int max_tokens) {
  absl::StatusOr<Generation> got = absl::UnavailableError("not tried");
  for (int attempt = 0; attempt < 50 && !got.ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    got = GenerateWith(model, prompt, max_tokens);
  }
  return got;
}

absl::StatusOr<Generation> GenerateLocal(const std::string& model,
                                         const std::vector<int32_t>& prompt,
                                         int max_tokens) {
  coordinator::ModelOptions mo;
  mo.threads = 2;
  FLOTILLA_ASSIGN_OR_RETURN(auto m,
                            coordinator::K3Model::OpenDir(model, "", mo));
  return GenerateWith(*m, prompt, max_tokens);
}

absl::StatusOr<std::unique_ptr<coordinator::K3Model>> OpenRemoteModel(
    const std::string& model, coordinator::RemoteExpertsOptions options) {
  FLOTILLA_ASSIGN_OR_RETURN(model::K3Config config,
                            model::LoadK3Config(model + "/config.json"));
  FLOTILLA_ASSIGN_OR_RETURN(auto source,
                            model::SafetensorsCheckpoint::OpenDir(model));
  if (options.expected_fingerprint.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(options.expected_fingerprint,
                              model::FingerprintCheckpoint(model, *source));
  }
  FLOTILLA_ASSIGN_OR_RETURN(
      auto experts, coordinator::RemoteExperts::Connect(config.Moe(), options));
  FLOTILLA_ASSIGN_OR_RETURN(auto trunk,
                            coordinator::InMemoryTrunk::Build(*source, config));
  std::shared_ptr<model::TensorSource> keep(std::move(source));
  return coordinator::K3Model::FromParts(
      config, std::make_unique<kernels::ThreadPool>(2), std::move(trunk),
      std::move(experts), keep);
}

absl::StatusOr<RemoteRun> GenerateOnWorkers(
    const std::string& model, const coordinator::RemoteExpertsOptions& options,
    const std::vector<int32_t>& prompt, int max_tokens) {
  FLOTILLA_ASSIGN_OR_RETURN(auto remote, OpenRemoteModel(model, options));
  RemoteRun run;
  FLOTILLA_ASSIGN_OR_RETURN(run.generation,
                            GenerateWith(*remote, prompt, max_tokens));
  run.stats = static_cast<coordinator::RemoteExperts*>(remote->experts())
                  ->remote_stats();
  return run;
}

absl::Status XorByte(const std::string& path, uint64_t offset, uint8_t mask) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (f == nullptr) return absl::NotFoundError("cannot open " + path);
  const long at = static_cast<long>(offset);
  int byte = EOF;
  if (std::fseek(f, at, SEEK_SET) == 0) byte = std::fgetc(f);
  const bool ok = byte != EOF && std::fseek(f, at, SEEK_SET) == 0 &&
                  std::fputc(byte ^ mask, f) != EOF;
  if (std::fclose(f) != 0 || !ok) {
    return absl::DataLossError("cannot rewrite a byte of " + path);
  }
  return absl::OkStatus();
}

int RunCommand(const std::string& command, std::string* output) {
  TempDir dir;
  const std::string log = dir.path() + "/out";
  const int status = std::system((command + " >" + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream buf;
  buf << in.rdbuf();
  *output = buf.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

absl::Status Synth(const std::string& dir, uint64_t seed) {
  std::string out;
  const int code =
      RunCommand(absl::StrCat(BinPath("flotilla-tool"),
                              " synth --preset k3-tiny --buffered --out ", dir,
                              " --seed ", seed),
                 &out);
  if (code != 0) {
    return absl::InternalError(
        absl::StrCat("synth failed (", code, "): ", out));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<int32_t>>> BatchedStepsAgainstSolo(
    coordinator::LanguageModel& m, std::vector<std::vector<int32_t>> next,
    int steps) {
  std::vector<std::unique_ptr<coordinator::ModelSequence>> batch, solo;
  for (size_t i = 0; i < next.size(); ++i) {
    batch.push_back(m.StartSequence());
    solo.push_back(m.StartSequence());
  }
  std::vector<std::vector<int32_t>> ids(next.size());
  for (int step = 0; step < steps; ++step) {
    std::vector<coordinator::ModelSequence*> seqs;
    for (auto& s : batch) seqs.push_back(s.get());
    std::vector<std::vector<float>> together;
    FLOTILLA_RETURN_IF_ERROR(m.ForwardBatch(seqs, next, &together));
    for (size_t i = 0; i < next.size(); ++i) {
      std::vector<float> alone;
      FLOTILLA_RETURN_IF_ERROR(
          m.Forward(solo[i].get(), next[i], false, &alone));
      if (together[i].size() != alone.size() ||
          std::memcmp(together[i].data(), alone.data(),
                      alone.size() * sizeof(float)) != 0) {
        return absl::InternalError(
            absl::StrCat("sequence ", i, " step ", step,
                         ": batched logits differ from its solo run's"));
      }
      const int32_t id = testutil::ArgMax(alone.data(), alone.size());
      ids[i].push_back(id);
      next[i] = {id};
    }
  }
  return ids;
}

}  // namespace flotilla::dtest
