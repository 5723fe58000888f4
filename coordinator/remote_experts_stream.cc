// Compute calls over a worker's ComputeStream (remote_experts_internal.h:
// StreamedCall). A stream message skips gRPC's per-call set-up on both
// sides; bench/distributed/README.md (session 6) measured what that saves.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/remote_experts_internal.h"

namespace flotilla::coordinator {

void RemoteExperts::Impl::SendOnStream(int w, const v1::ComputeRequest& request,
                                       ComputeTag* call,
                                       v1::ComputeResponse* response,
                                       grpc::Status* status, StreamedCall* sc) {
  WorkerConn& worker = workers[w];
  ++stats.streamed_calls;
  sc->call = call;
  sc->status = status;
  sc->tag.stream_op = true;
  sc->worker = w;
  sc->pending = 2;  // the write and the read
  sc->failed = sc->finishing = sc->timed_out = false;
  if (worker.stream == nullptr) {
    // No deadline: the stream outlives calls, whose lateness
    // AwaitComputeCalls judges. Fails fast when the worker is unreachable.
    // Corked: the start sends nothing (and completes no tag); the stream's
    // headers go with the first write, which may then follow at once.
    worker.stream = std::make_unique<ComputeStream>();
    worker.stream->context.set_initial_metadata_corked(true);
    worker.stream->rw =
        worker.stub->AsyncComputeStream(&worker.stream->context, &cq, &sc->tag);
  }
  worker.stream->rw->Write(request, &sc->tag);
  worker.stream->rw->Read(response, &sc->tag);
}

bool RemoteExperts::Impl::OnStreamEvent(StreamedCall* sc, bool ok) {
  if (!ok) sc->failed = true;
  if (--sc->pending > 0) return false;
  WorkerConn& worker = workers[sc->worker];
  if (sc->finishing) {
    // The stream is over, and its status is the call's: the worker's own
    // error (say INVALID_ARGUMENT), or the connection's.
    if (sc->timed_out) {
      *sc->status =
          grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                       absl::StrCat("no answer on the ComputeStream within ",
                                    options.rpc_deadline_ms, " ms"));
    } else if (sc->status->ok()) {
      *sc->status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "the worker ended its ComputeStream");
    }
    worker.stream.reset();  // the next call opens a new one
    return true;
  }
  if (!sc->failed) {
    *sc->status = grpc::Status::OK;
    return true;
  }
  // A failed write or read: every operation is done, so the stream can be
  // finished for its status.
  sc->finishing = true;
  sc->pending = 1;
  worker.stream->rw->Finish(sc->status, &sc->tag);
  return false;
}

void RemoteExperts::Impl::CloseStreams() {
  std::vector<CqTag> tags;
  std::vector<grpc::Status> statuses;
  tags.reserve(workers.size());
  statuses.reserve(workers.size());
  for (WorkerConn& worker : workers) {
    if (worker.stream == nullptr) continue;
    tags.emplace_back();
    statuses.emplace_back();
    worker.stream->context.TryCancel();
    worker.stream->rw->Finish(&statuses.back(), &tags.back());
  }
  // Between layers nothing else of the streams is in flight, and the hints
  // were cancelled and drained before.
  for (size_t left = tags.size(); left > 0;) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    const CqTag* t = static_cast<const CqTag*>(tag);
    if (t >= tags.data() && t < tags.data() + tags.size()) --left;
  }
  for (WorkerConn& worker : workers) worker.stream.reset();
}

}  // namespace flotilla::coordinator
