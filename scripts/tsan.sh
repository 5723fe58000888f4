#!/usr/bin/env bash
# ThreadSanitizer over the unit tests of the code that runs threads: the
# batch readers and their checksum verifiers (flotilla_io_test), the expert
# fetcher and engine (flotilla_experts_test), streaming experts and vocab
# streaming (streaming_experts_test, vocab_stream_test), the thread pool,
# the worker's gRPC front end and compute queue (worker_server_test), and
# the coordinator's worker health thread, probes and failover over a fake
# fleet (remote_experts_test), and the completions the HTTP and gRPC front
# ends consume from the generation queue's thread (completion_job_test),
# and the HTTP server's accept loop and connection threads
# (http_service_test).
# Built with gcc -fsanitize=thread into
# build-tsan (only these targets); any race report fails the run.
# FLOTILLA_TSAN_FULL=1 adds the process-level tests (streaming_test's
# trunk ring through the CLI, distributed_failover_test, serve_test),
# which build the coordinator and the worker with TSan too.
#
#   scripts/tsan.sh [extra ctest args...]
#
# Every lock in Flotilla's own code is a std::mutex (or condition_variable,
# or an atomic), which TSan sees; Debian's gRPC and Abseil are not built
# with TSan, so reports about gRPC's own hand-offs are suppressed by
# tests/tsan.supp, which says exactly what it hides. The whole suite runs
# under TSan with scripts/test.sh --sanitize=thread (same folder).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
BUILD="${FLOTILLA_TSAN_DIR:-build-tsan}"
TARGETS=(vocab_stream_test flotilla_io_test flotilla_experts_test
         streaming_experts_test thread_pool_test worker_server_test
         remote_experts_test compute_queue_test completion_job_test
         http_service_test flotilla-expert-worker)
REGEX='^(Readers/VocabStreamTest|Vocabularies/StreamTest|Kinds/BatchReaderTest|CreateBatchReaderTest|ExpertFetcherTest|All/FetcherMatrixTest|ExpertEngineTest|StreamingExpertsTest|ThreadPoolTest|ServedWorkerTest|WorkerServerTest|WorkerCommandLineTest|RemoteExpertsTest|ComputeQueueTest|CompletionThreadsTest|HttpServiceTest'
if [[ "${FLOTILLA_TSAN_FULL:-0}" == "1" ]]; then
  TARGETS+=(streaming_test distributed_failover_test serve_test
            flotilla-coordinator flotilla-tool)
  REGEX+='|Checkpoints/StreamingTest|FailoverTest|ServeTest'
fi
REGEX+=')\.'
cmake -S . -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFLOTILLA_SANITIZE=thread -DFLOTILLA_SANITIZE_THREAD=OFF -DFLOTILLA_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "${BUILD}" -j"$(nproc)" --target "${TARGETS[@]}"
# halt_on_error: a race fails its test instead of scrolling past.
# tests/tsan.supp: gRPC's own hand-offs only (it says what it hides).
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=${ROOT}/tests/tsan.supp}"
ctest --test-dir "${BUILD}" -R "${REGEX}" -j"${FLOTILLA_CTEST_JOBS:-2}" \
  --output-on-failure "$@"
