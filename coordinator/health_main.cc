// flotilla-coordinator health: asks a Flotilla server's gRPC health service
// (grpc.health.v1.Health/Check for the whole server) whether it is
// SERVING: an expert worker, or `serve --grpc-port`, which says NOT_SERVING
// while some expert has no live worker. For scripts and container health
// checks. Here, not in flotilla-tool, which links no gRPC.
#include <cstdio>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "shared/transport/address.h"
#include "shared/transport/transport.h"

ABSL_FLAG(std::string, address, "",
          "health: the server's gRPC HOST:PORT (a worker's --port, serve's "
          "--grpc-port)");
ABSL_FLAG(int32_t, health_timeout_ms, 2000, "health: deadline of the check");
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);

namespace flotilla::coordinator {

// Prints SERVING or NOT_SERVING and returns 0 or 1; 1 with the reason for
// an unreachable server, 2 for a bad flag.
int RunHealth() {
  auto fail = [](int code, const std::string& why) {
    std::fprintf(stderr, "flotilla-coordinator health: %s\n", why.c_str());
    return code;
  };
  const std::string address = absl::GetFlag(FLAGS_address);
  if (absl::Status s = transport::CheckHostPort(address); !s.ok()) {
    return fail(2, absl::StrCat("--address: ", s.message()));
  }
  const int timeout_ms = absl::GetFlag(FLAGS_health_timeout_ms);
  if (timeout_ms < 1 || timeout_ms > 600000) {
    return fail(2, "--health-timeout-ms must be in 1..600000");
  }
  transport::TlsFiles tls;
  tls.ca = absl::GetFlag(FLAGS_tls_ca);
  tls.cert = absl::GetFlag(FLAGS_tls_cert);
  tls.key = absl::GetFlag(FLAGS_tls_key);
  auto credentials = transport::MakeChannelCredentials(tls);
  if (!credentials.ok()) return fail(2, credentials.status().ToString());
  const absl::StatusOr<bool> serving = transport::CheckHealthServing(
      transport::NewChannel(address, *credentials, transport::ChannelOptions()),
      timeout_ms);
  if (!serving.ok()) {
    return fail(1, absl::StrCat(address, ": ", serving.status().ToString()));
  }
  std::printf("%s\n", *serving ? "SERVING" : "NOT_SERVING");
  return *serving ? 0 : 1;
}

}  // namespace flotilla::coordinator
