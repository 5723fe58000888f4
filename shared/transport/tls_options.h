// TLS settings for coordinator <-> worker channels, as file paths. Free of
// gRPC headers so that option structs (EngineOptions, worker flags) can hold
// them; shared/transport/transport.h turns them into credentials.
#ifndef FLOTILLA_SHARED_TRANSPORT_TLS_OPTIONS_H_
#define FLOTILLA_SHARED_TRANSPORT_TLS_OPTIONS_H_

#include <string>

namespace flotilla::transport {

// PEM files. All empty: plaintext.
//  Server (worker): cert + key serve TLS; adding `ca` requires every client
//    to present a certificate signed by it (mutual TLS).
//  Client (coordinator): `ca` verifies the server (TLS); adding cert + key
//    presents a client certificate (mutual TLS).
struct TlsFiles {
  std::string ca;    // trusted root(s) for the peer's certificate
  std::string cert;  // own certificate chain
  std::string key;   // own private key

  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_TLS_OPTIONS_H_
