#!/usr/bin/env bash
# ThreadSanitizer over the tests of the code that runs threads: the trunk
# ring and vocab streaming (streaming_test, vocab_stream_test), the batch
# readers and checksum verifiers (flotilla_io_test), the expert fetcher
# and engine (flotilla_experts_test, streaming_experts_test), the thread
# pool, the worker's gRPC front end and compute queue (worker_server_test),
# the coordinator's worker health thread and failover (remote_experts_test,
# distributed_failover_test) and serve's generation queue (serve_test).
# Built with gcc -fsanitize=thread into build-tsan (only these targets and
# the binaries they start); any race report fails the run.
#
#   scripts/tsan.sh [extra ctest args...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
BUILD="${FLOTILLA_TSAN_DIR:-build-tsan}"
TARGETS=(streaming_test vocab_stream_test flotilla_io_test
         flotilla_experts_test streaming_experts_test thread_pool_test
         worker_server_test remote_experts_test distributed_failover_test
         serve_test flotilla-expert-worker flotilla-coordinator flotilla-tool)
REGEX='^(Checkpoints/StreamingTest|Readers/VocabStreamTest|Kinds/BatchReaderTest|CreateBatchReaderTest|ExpertFetcherTest|All/FetcherMatrixTest|ExpertEngineTest|StreamingExpertsTest|ThreadPoolTest|ServedWorkerTest|WorkerServerTest|RemoteExpertsTest|FailoverTest|ServeTest)\.'
cmake -S . -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFLOTILLA_SANITIZE_THREAD=ON -DFLOTILLA_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "${BUILD}" -j"$(nproc)" --target "${TARGETS[@]}"
# halt_on_error: a race fails its test instead of scrolling past.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
ctest --test-dir "${BUILD}" -R "${REGEX}" -j"${FLOTILLA_CTEST_JOBS:-2}" \
  --output-on-failure "$@"
