#include "shared/transport/transport.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::transport {
namespace {

using ::testing::HasSubstr;

TEST(StatusMappingTest, CodesAndMessagesRoundTrip) {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status s(static_cast<absl::StatusCode>(code), "why");
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), code);
    const absl::Status back = FromGrpcStatus(g);
    EXPECT_EQ(back.code(), s.code());
    if (code != 0) {
      EXPECT_EQ(back.message(), "why");
    }
  }
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"),
                           "worker a:1: Compute")
                .message(),
            "worker a:1: Compute: down");
}

TEST(CredentialsTest, EmptyIsInsecureAndBadFilesAreNamed) {
  EXPECT_TRUE(MakeServerCredentials(TlsFiles()).ok());
  EXPECT_TRUE(MakeChannelCredentials(TlsFiles()).ok());
  TlsFiles only_ca;
  only_ca.ca = "/nonexistent/ca.pem";
  auto server = MakeServerCredentials(only_ca);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("key"));
  auto client = MakeChannelCredentials(only_ca);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(std::string(client.status().message()),
              HasSubstr("/nonexistent/ca.pem"));
  const std::string junk =
      (std::filesystem::temp_directory_path() / "flotilla_not_pem.txt")
          .string();
  std::ofstream(junk) << "hello";
  TlsFiles bad;
  bad.ca = junk;
  auto c = MakeChannelCredentials(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("not a PEM"));
  std::filesystem::remove(junk);
}

TEST(HostPortTest, BracketsIpv6) {
  EXPECT_EQ(HostPort("127.0.0.1", 5), "127.0.0.1:5");
  EXPECT_EQ(HostPort("::1", 5), "[::1]:5");
}

TEST(StartServerTest, ListensOnAFreePortWithHealth) {
  ServerOptions options;
  options.host = "127.0.0.1";
  int port = 0;
  auto server = StartServer(options, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT(port, 0);
  EXPECT_NE((*server)->GetHealthCheckService(), nullptr);
  auto channel = grpc::CreateChannel(HostPort("127.0.0.1", port),
                                     grpc::InsecureChannelCredentials());
  const absl::StatusOr<bool> serving = CheckHealthServing(channel, 10000);
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);
  (*server)->Shutdown();
  // Nobody answers now: an error, not a silent "not serving".
  EXPECT_FALSE(CheckHealthServing(channel, 2000).ok());
}

}  // namespace
}  // namespace flotilla::transport
