// The socket side of a connection: waiting for bytes or room under a
// deadline (in slices, so a stopping service is noticed), and writing a
// response whole or as a chunked stream.
#ifndef FLOTILLA_SHARED_HTTP_HTTP_WIRE_H_
#define FLOTILLA_SHARED_HTTP_HTTP_WIRE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shared/http/http_service.h"

namespace flotilla::http {

// True once `fd` has bytes to read (or is closed); false past `deadline`
// or once `service` (may be null) is stopping.
bool WaitReadable(int fd, absl::Time deadline, const HttpService* service);
// Sends all of `data`; false when the client went away or did not read
// it by `deadline`.
bool SendAll(int fd, absl::string_view data, absl::Time deadline,
             const HttpService* service);
// Status line, headers (Content-Type, CORS, Content-Length or chunked,
// Connection) and body or stream. Each send has options.send_timeout.
// Calls response.stream_end. False when the client went away first.
bool SendResponse(int fd, const HttpResponse& response, bool keep_alive,
                  const HttpServiceOptions& options,
                  const HttpService* service);
// "OK", "Not Found", ...
const char* ReasonPhrase(int status);

}  // namespace flotilla::http

#endif  // FLOTILLA_SHARED_HTTP_HTTP_WIRE_H_
