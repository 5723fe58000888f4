#include "shared/transport/address.h"

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace flotilla::transport {
namespace {

absl::Status Bad(absl::string_view address, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("address '",
                                                 absl::CEscape(address),
                                                 "' is not host:port: ", why));
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A DNS name, or dotted IPv4 when every label is numeric.
absl::Status CheckHost(absl::string_view address, absl::string_view host) {
  if (host.size() > 253) return Bad(address, "the host name is too long");
  const std::vector<absl::string_view> labels = absl::StrSplit(host, '.');
  bool numeric = true;
  for (absl::string_view label : labels) numeric = numeric && AllDigits(label);
  if (numeric) {
    if (labels.size() != 4) {
      return Bad(address, "an IPv4 address has four dotted parts");
    }
    for (absl::string_view label : labels) {
      int part = 0;
      if (label.size() > 3 || !absl::SimpleAtoi(label, &part) || part > 255) {
        return Bad(address,
                   absl::StrCat("IPv4 part '", label, "' is not in 0..255"));
      }
    }
    return absl::OkStatus();
  }
  for (absl::string_view label : labels) {
    if (label.empty() || label.size() > 63) {
      return Bad(address, "empty or over-long label in the host name");
    }
    if (label.front() == '-' || label.back() == '-') {
      return Bad(address, "a host name label starts or ends with '-'");
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') {
        return Bad(address, absl::StrCat("character '", absl::CEscape({&c, 1}),
                                         "' cannot be in a host name"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckHostPort(absl::string_view address) {
  if (address.find("://") != absl::string_view::npos ||
      absl::StartsWith(address, "unix:")) {
    return Bad(address, "URI schemes and unix sockets are not supported");
  }
  absl::string_view host;
  absl::string_view port;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos ||
        address.substr(close + 1, 1) != ":") {
      return Bad(address, "write an IPv6 address as [addr]:port");
    }
    const std::string literal(address.substr(1, close - 1));
    in6_addr unused;
    if (inet_pton(AF_INET6, literal.c_str(), &unused) != 1) {
      return Bad(address, absl::StrCat("'", literal, "' is not IPv6"));
    }
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return Bad(address, "no ':port'");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.empty()) return Bad(address, "no host before ':'");
    if (host.find(':') != absl::string_view::npos) {
      return Bad(address, "write an IPv6 address as [addr]:port");
    }
    if (absl::Status s = CheckHost(address, host); !s.ok()) return s;
  }
  int number = 0;
  if (!AllDigits(port) || port.size() > 5 || !absl::SimpleAtoi(port, &number) ||
      number < 1 || number > 65535) {
    return Bad(address,
               absl::StrCat("port '", port, "' is not a number in 1..65535"));
  }
  return absl::OkStatus();
}

}  // namespace flotilla::transport
