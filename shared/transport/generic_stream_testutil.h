// Test helper: one call of any gRPC method by name with raw message bytes,
// so tests can speak health and reflection without compiling their protos
// (compiling health.proto or reflection.proto next to libgrpc++'s own
// copy aborts at start-up on duplicate descriptors). Header-only; tests only.
#ifndef FLOTILLA_SHARED_TRANSPORT_GENERIC_STREAM_TESTUTIL_H_
#define FLOTILLA_SHARED_TRANSPORT_GENERIC_STREAM_TESTUTIL_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace flotilla::transport {

struct StreamResult {
  grpc::Status status;
  std::vector<std::string> responses;
  bool timed_out = false;  // an operation took longer than the deadline
};

// Calls `method` ("/package.Service/Method"), writes `requests`, closes its
// side and reads responses until the server ends the call, or until
// `max_reads` (when >= 0) have arrived, after which it cancels the call.
// `after_read(n)` runs after the n-th response (e.g. to shut a server
// down while a stream is open). Every step waits at most 10 s.
inline StreamResult CallStream(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::vector<std::string>& requests, int max_reads = -1,
    const std::function<void(int)>& after_read = nullptr) {
  StreamResult result;
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  // Waits for the one operation in flight; false when it failed.
  auto wait = [&]() {
    void* tag = nullptr;
    bool ok = false;
    const auto status = cq.AsyncNext(
        &tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (status != grpc::CompletionQueue::GOT_EVENT) {
      result.timed_out = true;
      return false;
    }
    return ok;
  };
  call->StartCall(&cq);
  bool open = wait();
  for (const std::string& r : requests) {
    if (!open) break;
    grpc::Slice slice(r);
    grpc::ByteBuffer buffer(&slice, 1);
    call->Write(buffer, &cq);
    open = wait();
  }
  if (open) {
    call->WritesDone(&cq);
    open = wait();
  }
  while (open && !result.timed_out &&
         (max_reads < 0 ||
          static_cast<int>(result.responses.size()) < max_reads)) {
    grpc::ByteBuffer buffer;
    call->Read(&buffer, &cq);
    if (!wait()) break;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (buffer.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    result.responses.push_back(std::move(bytes));
    if (after_read) after_read(static_cast<int>(result.responses.size()));
  }
  if (result.timed_out ||
      (max_reads >= 0 &&
       static_cast<int>(result.responses.size()) >= max_reads)) {
    context.TryCancel();
  }
  call->Finish(&result.status, &cq);
  wait();
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return result;
}

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_GENERIC_STREAM_TESTUTIL_H_
