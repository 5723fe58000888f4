// Helpers for the multi-process distributed tests (tests/distributed_*):
// expert-worker child processes on loopback (free ports chosen by the worker
// itself, always killed on destruction), the single-process reference run,
// and an in-test coordinator driver (a K3Model with an in-memory trunk and
// RemoteExperts) that stays up across worker failures, which the one-shot
// `flotilla-coordinator generate` CLI cannot.
#ifndef FLOTILLA_TESTS_DISTRIBUTED_TEST_UTIL_H_
#define FLOTILLA_TESTS_DISTRIBUTED_TEST_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/families/kimi_k3/model.h"
#include "coordinator/generate.h"
#include "coordinator/remote/remote_experts.h"
#include "shared/testing/fixture.h"

namespace flotilla::dtest {

std::string BinPath(const std::string& name);  // build/bin/<name>
std::string CkptA();                           // tests/fixtures/k3/ckpt_A

// A fresh directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One flotilla-expert-worker child. Output goes to a log file so a chatty
// child can never block on a full pipe.
class WorkerProcess {
 public:
  // Starts the worker with `args` plus --host=127.0.0.1 --port=<port> (0:
  // the worker picks a free port) and waits up to 60 s for its "listening
  // on" line. The error includes the worker's output.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(
      const std::vector<std::string>& args, const std::string& log_path,
      int port = 0);
  ~WorkerProcess();  // SIGKILL and reap if still running

  int port() const { return port_; }
  std::string address() const;  // 127.0.0.1:port
  pid_t pid() const { return pid_; }
  // Sends `sig`; SIGKILL / SIGTERM also reap the child.
  void Signal(int sig);
  bool running() const { return pid_ > 0; }
  std::string Log() const;

 private:
  WorkerProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

using Fleet = std::vector<std::unique_ptr<WorkerProcess>>;

// N workers on `model` (--shard k/N --replicas R), logs under `log_dir`.
absl::StatusOr<Fleet> StartFleet(const std::string& model, int n, int r,
                                 const std::string& log_dir,
                                 const std::vector<std::string>& extra = {});
std::vector<std::string> Addresses(const Fleet& fleet);

struct Generation {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids][vocab]
};

// The single-process run (LocalExperts, trunk in RAM).
absl::StatusOr<Generation> GenerateLocal(const std::string& model,
                                         const std::vector<int32_t>& prompt,
                                         int max_tokens);

// A model with its trunk in RAM and RemoteExperts; fills
// options.expected_fingerprint from the checkpoint when empty.
absl::StatusOr<std::unique_ptr<coordinator::K3Model>> OpenRemoteModel(
    const std::string& model, coordinator::RemoteExpertsOptions options);

absl::StatusOr<Generation> GenerateWith(
    coordinator::K3Model& model, const std::vector<int32_t>& prompt,
    int max_tokens, const coordinator::TokenCallback& on_token = nullptr);

// OpenRemoteModel + GenerateWith, and the RemoteStats after it.
struct RemoteRun {
  Generation generation;
  coordinator::RemoteStats stats;
};
absl::StatusOr<RemoteRun> GenerateOnWorkers(
    const std::string& model, const coordinator::RemoteExpertsOptions& options,
    const std::vector<int32_t>& prompt, int max_tokens);

// GenerateWith, tried every 200 ms for up to 10 s until it succeeds (a
// restarted worker is picked up after the coordinator's backoff); the last
// result.
absl::StatusOr<Generation> GenerateWhenBack(coordinator::K3Model& model,
                                            const std::vector<int32_t>& prompt,
                                            int max_tokens);

// Runs a shell command; returns its exit code, output (stdout + stderr) in
// `output`.
int RunCommand(const std::string& command, std::string* output);

// XORs the byte at `offset` of `path` with `mask` (a corrupted disk, or
// other weights): twice restores it.
absl::Status XorByte(const std::string& path, uint64_t offset, uint8_t mask);

// Writes a k3-tiny synthetic checkpoint (flotilla-tool synth) into `dir`.
absl::Status Synth(const std::string& dir, uint64_t seed);

// Steps sequences started from `next` (each one's first ids) through `m`
// for `steps` steps twice: all together (ForwardBatch) and each alone
// (Forward), feeding each its greedy id. Returns every sequence's greedy
// ids [sequence][step], or an error naming the first sequence and step
// whose batched logits differ in any bit from its solo run's.
absl::StatusOr<std::vector<std::vector<int32_t>>> BatchedStepsAgainstSolo(
    coordinator::LanguageModel& m, std::vector<std::vector<int32_t>> next,
    int steps);

using testutil::MaxAbsDiff;

// The prompt every distributed test uses (ckpt_A's reference prompt).
inline const std::vector<int32_t> kPrompt = {3, 7, 11, 5, 9};

}  // namespace flotilla::dtest

#endif  // FLOTILLA_TESTS_DISTRIBUTED_TEST_UTIL_H_
