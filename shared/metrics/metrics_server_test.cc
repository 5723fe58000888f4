#include "shared/metrics/metrics_server.h"

#include <httplib.h>

#include "gtest/gtest.h"
#include "prometheus/counter.h"

namespace flotilla::metrics {
namespace {

TEST(MetricsServerTest, ServesTheRegistryInTextFormat) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& requests = prometheus::BuildCounter()
                       .Name("flotilla_test_requests_total")
                       .Help("requests")
                       .Register(*registry)
                       .Add({{"status", "200"}});
  requests.Increment(3);
  AddBuildInfo(*registry, "test");
  auto server = MetricsServer::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"),
            std::string::npos);
  EXPECT_NE(r->body.find("flotilla_test_requests_total{status=\"200\"} 3"),
            std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find("flotilla_build_info{component=\"test\""),
            std::string::npos)
      << r->body;
  // A second server on the same port is refused with a Status, not thrown.
  auto again = MetricsServer::Start("127.0.0.1", (*server)->port(), registry);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("cannot listen"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::metrics
