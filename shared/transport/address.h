// Worker addresses as a user types them (--workers, compose files): checked
// at once, so a typo gets an error naming it instead of a connect wait.
#ifndef FLOTILLA_SHARED_TRANSPORT_ADDRESS_H_
#define FLOTILLA_SHARED_TRANSPORT_ADDRESS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace flotilla::transport {

// OK when `address` is "host:port": host a DNS name (letters, digits, '-'
// and '.'), a dotted IPv4 address with every part in 0..255, or a
// bracketed IPv6 literal ("[::1]:7000"); port a decimal in 1..65535.
// Otherwise InvalidArgument saying which part is wrong. URI schemes
// ("unix:/path", "dns:///h:p") are refused: the workers listen on TCP.
absl::Status CheckHostPort(absl::string_view address);

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_ADDRESS_H_
