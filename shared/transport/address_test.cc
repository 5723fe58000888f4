#include "shared/transport/address.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::transport {
namespace {

using ::testing::HasSubstr;

TEST(CheckHostPortTest, AcceptsNamesIpv4AndBracketedIpv6) {
  for (const char* ok :
       {"localhost:7000", "worker-0:50051", "10.0.0.7:1", "127.0.0.1:65535",
        "[::1]:7000", "[fe80::1:2]:8080", "a.b-c.example:443"}) {
    EXPECT_TRUE(CheckHostPort(ok).ok()) << ok << ": " << CheckHostPort(ok);
  }
}

TEST(CheckHostPortTest, NamesWhatIsWrong) {
  const struct {
    const char* address;
    const char* why;
  } cases[] = {
      {":", "no host before ':'"},
      {"", "no ':port'"},
      {"localhost", "no ':port'"},
      {"unix:/x", "unix sockets"},
      {"dns:///h:1", "URI schemes"},
      {"256.256.256.256:80", "IPv4 part '256'"},
      {"1.2.3:80", "four dotted parts"},
      {"host:0", "port '0'"},
      {"host:65536", "port '65536'"},
      {"host:http", "port 'http'"},
      {"host:-1", "port '-1'"},
      {"host:", "port ''"},
      {"::1:7000", "[addr]:port"},
      {"[::1]7000", "[addr]:port"},
      {"[zz::1]:7000", "'zz::1' is not IPv6"},
      {"bad_name:1", "character '_'"},
      {"-lead:1", "starts or ends with '-'"},
      {"a..b:1", "empty or over-long label"},
  };
  for (const auto& c : cases) {
    const absl::Status s = CheckHostPort(c.address);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.address;
    EXPECT_THAT(s.message(), HasSubstr(c.why)) << c.address;
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + c.address + "'"));
  }
  // A NUL inside the text is named, not cut at.
  const std::string nul("ho\0st:1", 7);
  EXPECT_THAT(CheckHostPort(nul).message(), HasSubstr("\\000"));
}

}  // namespace
}  // namespace flotilla::transport
