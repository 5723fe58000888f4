// Health and reflection served on a polled queue, spoken to over loopback
// gRPC with raw bytes (generic_stream_testutil.h).
#include "shared/transport/polled_standard_services.h"

#include <grpcpp/alarm.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "flotilla/v1/expert.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/transport/generic_stream_testutil.h"
#include "shared/transport/reflection_answers.h"
#include "shared/transport/transport.h"

namespace flotilla::transport {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kServing("\x08\x01", 2), kNotServing("\x08\x02", 2);

// A server whose only methods are PolledStandardServices', polled by one
// thread the way the worker's polling front end does.
class PolledServer {
 public:
  PolledServer() : services_({"flotilla.v1.ExpertService"}) {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.standard_services_on_queue = true;
    options.generic_service = services_.generic_service();
    options.async_queue = &cq_;
    int port = 0;
    absl::StatusOr<std::unique_ptr<grpc::Server>> server =
        StartServer(options, &port);
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    services_.Start(cq_.get());
    thread_ = std::thread([this] {
      void* tag = nullptr;
      bool ok = false;
      while (cq_->Next(&tag, &ok)) {
        if (tag == &not_serving_tag_) {
          services_.SetNotServing();
          continue;
        }
        auto* op = static_cast<PolledOp*>(tag);
        if (!op->Proceed(ok)) delete op;
      }
    });
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
  }
  ~PolledServer() {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    cq_->Shutdown();
    thread_.join();
  }

  // Any thread: health turns NOT_SERVING on the polling thread.
  void SetNotServing() {
    alarm_.Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC), &not_serving_tag_);
  }

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  PolledStandardServices services_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  std::thread thread_;
  grpc::Alarm alarm_;
  int not_serving_tag_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
};

std::string HealthRequest(const std::string& service) {
  std::string r;
  if (!service.empty()) AppendLengthDelimited(1, service, &r);
  return r;
}

TEST(PolledStandardServicesTest, HealthCheckAnswersLikeGrpcs) {
  PolledServer server;
  const absl::StatusOr<bool> serving =
      CheckHealthServing(server.channel(), 10000);
  ASSERT_TRUE(serving.ok()) << serving.status();
  EXPECT_TRUE(*serving);

  StreamResult named =
      CallStream(server.channel(), "/grpc.health.v1.Health/Check",
                 {HealthRequest("flotilla.v1.ExpertService")});
  ASSERT_TRUE(named.status.ok()) << named.status.error_message();
  EXPECT_THAT(named.responses, ElementsAre(kServing));

  StreamResult unknown = CallStream(
      server.channel(), "/grpc.health.v1.Health/Check", {HealthRequest("x.Y")});
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("x.Y"));

  StreamResult garbage =
      CallStream(server.channel(), "/grpc.health.v1.Health/Check", {"\x0a"});
  EXPECT_EQ(garbage.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  StreamResult none =
      CallStream(server.channel(), "/grpc.health.v1.Health/Check", {});
  EXPECT_EQ(none.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(PolledStandardServicesTest, WatchSeesNotServingAndEnds) {
  PolledServer server;
  StreamResult watch =
      CallStream(server.channel(), "/grpc.health.v1.Health/Watch",
                 {HealthRequest("")}, /*max_reads=*/-1, [&](int n) {
                   if (n == 1) server.SetNotServing();
                 });
  EXPECT_FALSE(watch.timed_out);
  EXPECT_TRUE(watch.status.ok()) << watch.status.error_message();
  EXPECT_THAT(watch.responses, ElementsAre(kServing, kNotServing));

  StreamResult check = CallStream(
      server.channel(), "/grpc.health.v1.Health/Check", {HealthRequest("")});
  EXPECT_THAT(check.responses, ElementsAre(kNotServing));
  // A service this server does not know is unknown, not NOT_SERVING.
  StreamResult unknown =
      CallStream(server.channel(), "/grpc.health.v1.Health/Watch",
                 {HealthRequest("x.Y")}, /*max_reads=*/1);
  EXPECT_THAT(unknown.responses, ElementsAre(std::string("\x08\x03", 2)));
}

TEST(PolledStandardServicesTest, ReflectionAnswersEveryRequestOfAStream) {
  EXPECT_NE(flotilla::v1::ComputeRequest::descriptor(), nullptr);
  PolledServer server;
  for (const char* version : {"v1alpha", "v1"}) {
    SCOPED_TRACE(version);
    std::string list, symbol;
    AppendLengthDelimited(7, "", &list);
    AppendLengthDelimited(4, "flotilla.v1.ExpertService", &symbol);
    StreamResult r =
        CallStream(server.channel(),
                   absl::StrCat("/grpc.reflection.", version,
                                ".ServerReflection/ServerReflectionInfo"),
                   {list, symbol});
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_EQ(r.responses.size(), 2u);
    // Each answer carries its request back; the second holds expert.proto.
    EXPECT_THAT(r.responses[0], HasSubstr("flotilla.v1.ExpertService"));
    EXPECT_THAT(r.responses[0], HasSubstr("grpc.health.v1.Health"));
    EXPECT_THAT(r.responses[1], HasSubstr("flotilla/v1/expert.proto"));
  }
}

TEST(PolledStandardServicesTest, UnknownMethodsAreUnimplemented) {
  PolledServer server;
  StreamResult r = CallStream(server.channel(), "/no.Such/Method", {"x"});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("/no.Such/Method"));
}

}  // namespace
}  // namespace flotilla::transport
