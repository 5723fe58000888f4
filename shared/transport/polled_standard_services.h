// gRPC's standard health service (grpc.health.v1.Health: Check and Watch)
// and server reflection (grpc.reflection.v1alpha and v1
// ServerReflection/ServerReflectionInfo) served on a completion queue that
// the caller polls, for servers whose every method must run on one polling
// thread (expert-worker/polling_front_end.cc says why). gRPC's own
// implementations use callback and sync methods, whose threads would take
// over the polling.
//
// Both are served through an AsyncGenericService with the messages
// encoded by hand: compiling health.proto or reflection.proto into a binary
// that links libgrpc++_reflection aborts at start-up on duplicate
// descriptors (notes/deps.md, trap 6). Reflection answers from protobuf's
// generated pool, so it describes every service compiled into the binary.
//
// Includes gRPC headers: only for the .cc files of services.
#ifndef FLOTILLA_SHARED_TRANSPORT_POLLED_STANDARD_SERVICES_H_
#define FLOTILLA_SHARED_TRANSPORT_POLLED_STANDARD_SERVICES_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace flotilla::transport {

// An operation in flight on a polled completion queue; its address is the
// operation's tag. The polling loop calls Proceed with the event's `ok`
// and deletes the object when Proceed returns false.
class PolledOp {
 public:
  virtual ~PolledOp() = default;
  virtual bool Proceed(bool ok) = 0;
};

class PolledStandardServices {
 public:
  // `services`: the full names of the server's own services, reported by
  // reflection's list_services and SERVING to health checks.
  explicit PolledStandardServices(std::vector<std::string> services);

  // Register this with the server, next to its own services.
  grpc::AsyncGenericService* generic_service() { return &generic_; }

  // After the server started: waits for calls on `cq`, whose events the
  // caller hands to PolledOp::Proceed on the one polling thread.
  void Start(grpc::ServerCompletionQueue* cq);

  // Health becomes NOT_SERVING: open Watch streams get it and end, later
  // checks get it. On the polling thread (e.g. from an alarm's event).
  void SetNotServing();

  // The state shared with the calls; public for them only.
  struct State;

 private:
  grpc::AsyncGenericService generic_;
  std::shared_ptr<State> state_;
};

// The full names of the services in ServerReflection's list_services.
inline constexpr char kHealthService[] = "grpc.health.v1.Health";
inline constexpr char kReflectionV1Alpha[] =
    "grpc.reflection.v1alpha.ServerReflection";
inline constexpr char kReflectionV1[] = "grpc.reflection.v1.ServerReflection";

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_POLLED_STANDARD_SERVICES_H_
