// WorkerTransport over gRPC: one channel per worker (created once, reused
// for every call), every call async on one completion queue that only the
// forward pass's thread reads, so it takes the answers itself with no
// hand-off from a gRPC thread. Keeps gRPC out of the header.
#ifndef FLOTILLA_COORDINATOR_REMOTE_GRPC_TRANSPORT_H_
#define FLOTILLA_COORDINATOR_REMOTE_GRPC_TRANSPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/remote/worker_transport.h"
#include "shared/transport/tls_options.h"

namespace flotilla::coordinator {

// `addresses`: "host:port" of every worker, in the fleet's order.
absl::StatusOr<std::unique_ptr<WorkerTransport>> MakeGrpcTransport(
    const std::vector<std::string>& addresses, const transport::TlsFiles& tls);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_GRPC_TRANSPORT_H_
