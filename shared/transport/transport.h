// The gRPC layer shared by the coordinator and the expert workers: status
// mapping between absl and gRPC, TLS / mutual-TLS credentials from PEM
// files, channel and server construction with the project's settings
// (message limits, fast reconnects, health + reflection on every server),
// and the generated flotilla.v1 code.
//
// Includes gRPC headers: include this only from the .cc files of services
// and clients (it adds seconds to every compile), never from headers that
// the engine or kernels include.
#ifndef FLOTILLA_SHARED_TRANSPORT_TRANSPORT_H_
#define FLOTILLA_SHARED_TRANSPORT_TRANSPORT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "flotilla/v1/expert.grpc.pb.h"  // IWYU pragma: export
#include "flotilla/v1/expert.pb.h"       // IWYU pragma: export
#include "shared/transport/tls_options.h"

namespace flotilla::transport {

// absl and gRPC share the canonical code numbering (0..16); codes outside
// it become UNKNOWN. Messages pass through unchanged.
grpc::Status ToGrpcStatus(const absl::Status& status);
// `context` (e.g. "worker 10.0.0.2:7000: Compute") is prefixed to the
// message when non-empty, so an error names the peer and the call.
absl::Status FromGrpcStatus(const grpc::Status& status,
                            absl::string_view context = "");

// Server credentials: insecure when `tls` is empty; TLS with tls.cert +
// tls.key; mutual TLS (client certificate required and verified against
// tls.ca) when tls.ca is set too. Errors name the unreadable file or the
// incomplete combination.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls);
// Channel credentials: insecure when `tls` is empty; TLS verifying the
// server against tls.ca (system roots when empty); plus a client
// certificate when tls.cert + tls.key are set (mutual TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const TlsFiles& tls);

struct ChannelOptions {
  // Largest message sent or received; default matches the worker's limit.
  uint64_t max_message_bytes = uint64_t{64} << 20;
  // Reconnect backoff after a peer goes away. gRPC's defaults (1 s growing
  // to 120 s) would keep a restarted worker unused for minutes.
  int min_reconnect_ms = 100;
  int max_reconnect_ms = 1000;
};

// A channel of its own (private subchannel pool), so that one worker's
// connection state never affects another's.
std::shared_ptr<grpc::Channel> NewChannel(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const ChannelOptions& options);

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: any free port
  TlsFiles tls;
  uint64_t max_message_bytes = uint64_t{64} << 20;
  std::vector<grpc::Service*> services;  // not owned; must outlive the server
};

// Builds and starts a server with the given services plus the standard
// health service (SERVING) and gRPC's server reflection. `bound_port`
// receives the
// port actually bound. UNAVAILABLE naming the address when it cannot listen.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const ServerOptions& options, int* bound_port);

// grpc.health.v1.Health/Check for the whole server (service ""), within
// `deadline_ms`: true when it answers SERVING. Sent over the generic stub
// with the message's bytes written by hand, because compiling health.proto
// next to the one in libgrpc++ aborts on duplicate descriptors
// (libgrpc++ registers its own copy). Errors are the call's own status.
absl::StatusOr<bool> CheckHealthServing(
    const std::shared_ptr<grpc::Channel>& channel, int deadline_ms);

// "host:port", with IPv6 literals bracketed.
std::string HostPort(const std::string& host, int port);

// Makes glibc keep freed message buffers for reuse instead of returning
// them to the kernel (mmap threshold 32 MiB, trim threshold 256 MiB). Every
// Compute call allocates and frees request, response and slice buffers of
// 10-300 KB, and faulting in fresh pages for each of them was a large part
// of the RPC time (bench/measurements.md). Process-wide; idempotent.
void KeepFreedMessageMemory();

// Turns off absl::Mutex deadlock detection, which Debian's libabsl (built
// without NDEBUG) leaves on: every lock of every gRPC mutex then records a
// stack trace and updates a global lock graph (GraphCycles was the top
// user-space symbol of the worker's gRPC threads). Process-wide; only the
// debugging aid is lost, never the locking. Idempotent.
void DisableMutexDeadlockDetection();

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_TRANSPORT_H_
