#include "shared/transport/transport.h"

#include <grpcpp/completion_queue.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "shared/base/check.h"
#include "shared/base/status_macros.h"

namespace flotilla::transport {
namespace {

// PEM files are a few KB; anything far larger is the wrong file.
constexpr std::streamsize kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read TLS ", what, " file ", path));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (text.empty() ||
      static_cast<std::streamsize>(text.size()) > kMaxPemBytes ||
      text.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS ", what, " file ", path, " is not a PEM file"));
  }
  return text;
}

int ClampInt(uint64_t v) {
  return v > static_cast<uint64_t>(std::numeric_limits<int>::max())
             ? std::numeric_limits<int>::max()
             : static_cast<int>(v);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  const grpc::StatusCode grpc_code =
      code > 0 && code <= static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)
          ? static_cast<grpc::StatusCode>(code)
          : grpc::StatusCode::UNKNOWN;
  return grpc::Status(grpc_code, std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status,
                            absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  const absl::StatusCode absl_code =
      code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
          ? static_cast<absl::StatusCode>(code)
          : absl::StatusCode::kUnknown;
  if (context.empty()) return absl::Status(absl_code, status.error_message());
  return absl::Status(absl_code,
                      absl::StrCat(context, ": ", status.error_message()));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.cert.empty() || tls.key.empty()) {
    return absl::InvalidArgumentError(
        "a TLS server needs both a certificate and a key (a CA alone only "
        "says which clients to accept)");
  }
  grpc::SslServerCredentialsOptions options(
      tls.ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  FLOTILLA_ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.key, "key"));
  FLOTILLA_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.cert, "certificate"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.ca.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls.ca, "CA"));
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs both --tls-cert and --tls-key");
  }
  grpc::SslCredentialsOptions options;
  if (!tls.ca.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls.ca, "CA"));
  }
  if (!tls.cert.empty()) {
    FLOTILLA_ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(tls.key, "key"));
    FLOTILLA_ASSIGN_OR_RETURN(options.pem_cert_chain,
                              ReadPem(tls.cert, "certificate"));
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> NewChannel(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(ClampInt(options.max_message_bytes));
  args.SetMaxSendMessageSize(ClampInt(options.max_message_bytes));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, options.min_reconnect_ms);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, options.min_reconnect_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, options.max_reconnect_ms);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, credentials, args);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const ServerOptions& options, int* bound_port) {
  FLOTILLA_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                            MakeServerCredentials(options.tls));
  // A process-wide setting, read when the builder is made.
  grpc::EnableDefaultHealthCheckService(true);
  // Keep this call: it is what makes the linker keep the reflection library
  // (Debian links with --as-needed), and it registers the service.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = HostPort(options.host, options.port);
  *bound_port = 0;
  builder.AddListeningPort(address, creds, bound_port);
  builder.SetMaxReceiveMessageSize(ClampInt(options.max_message_bytes));
  builder.SetMaxSendMessageSize(ClampInt(options.max_message_bytes));
  for (grpc::Service* service : options.services) {
    builder.RegisterService(service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address,
                     " (address in use, bad host, or no permission)"));
  }
  return server;
}

void KeepFreedMessageMemory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

std::string HostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos &&
                  (host.empty() || host.front() != '[');
  return absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

absl::StatusOr<bool> CheckHealthServing(
    const std::shared_ptr<grpc::Channel>& channel, int deadline_ms) {
  grpc::GenericStub generic(channel);
  // An empty HealthCheckRequest; a default ByteBuffer holds no buffer at all
  // and gRPC rejects it as an invalid message, so give it one empty slice.
  grpc::Slice empty_slice("");
  grpc::ByteBuffer request(&empty_slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(deadline_ms));
  // On a completion queue of our own, drained on this thread, as the
  // coordinator's worker transport does: no gRPC thread runs our code or
  // touches our locals, so there is no hand-off to get wrong (and none that
  // ThreadSanitizer, blind to Debian's uninstrumented gRPC locks, misreads).
  grpc::CompletionQueue cq;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      generic.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check",
                               request, &cq);
  call->StartCall();
  int tag = 0;
  call->Finish(&response, &status, &tag);
  void* got = nullptr;
  bool ok = false;
  // The deadline ends the call, so Next returns; ok is always true here.
  FLOTILLA_CHECK(cq.Next(&got, &ok) && got == &tag);
  cq.Shutdown();
  while (cq.Next(&got, &ok)) {
  }
  if (!status.ok()) return FromGrpcStatus(status, "health check");
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::DataLossError("health check: unreadable response");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // HealthCheckResponse{status: SERVING (1)} is field 1, varint 1.
  return bytes == std::string("\x08\x01", 2);
}

}  // namespace flotilla::transport
