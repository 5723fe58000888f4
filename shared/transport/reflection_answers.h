// Server reflection's answers (grpc.reflection.v1alpha and v1, which share
// their message layout), computed from protobuf's generated descriptor pool
// and encoded by hand; see polled_standard_services.h for why by hand.
#ifndef FLOTILLA_SHARED_TRANSPORT_REFLECTION_ANSWERS_H_
#define FLOTILLA_SHARED_TRANSPORT_REFLECTION_ANSWERS_H_

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::transport {

// The ServerReflectionResponse (wire bytes) to one ServerReflectionRequest
// (wire bytes). `services`: the names list_services reports. `sent`: the
// files already sent on this stream, updated; like gRPC's implementation, a
// file_descriptor_response carries the requested file and those of its
// transitive dependencies not sent before. Unreadable requests, unknown
// names and missing request kinds are answered with an error_response
// (INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED), as the protocol wants.
std::string AnswerReflectionRequest(std::string_view request,
                                    const std::vector<std::string>& services,
                                    std::set<std::string>* sent);

// Encoding helpers shared with the health service and the tests.
// Appends field `number` as a length-delimited value.
void AppendLengthDelimited(int number, std::string_view value,
                           std::string* out);
// Appends field `number` as a varint.
void AppendVarint(int number, uint64_t value, std::string* out);

// One field of a message, as read by ReadFields.
struct WireField {
  int number = 0;
  bool length_delimited = false;
  uint64_t varint = 0;     // when !length_delimited (varints only)
  std::string_view bytes;  // when length_delimited
};
// The top-level fields of `message` in order; false when it is not a
// well-formed message of varint and length-delimited fields (fixed-width
// fields are skipped).
bool ReadFields(std::string_view message, std::vector<WireField>* fields);

}  // namespace flotilla::transport

#endif  // FLOTILLA_SHARED_TRANSPORT_REFLECTION_ANSWERS_H_
