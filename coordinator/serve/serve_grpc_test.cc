// The gRPC Generation service beside the HTTP API, over the stories model:
// it streams the greedy reference, its text is valid UTF-8 with the exact
// bytes beside it, and bad requests answer INVALID_ARGUMENT naming the
// field.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/serve/grpc_generate.h"
#include "coordinator/serve/serve_test_fixture.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/tokenizer/utf8.h"
#include "shared/transport/transport.h"

namespace flotilla::coordinator::serve {

// The Generation service over the fixture's queue on a free loopback port,
// and a stub for it (null if it could not start).
struct GrpcFront {
  GrpcFront(LanguageModel* model, const tokenizer::Tokenizer* tokenizer,
            GenerationQueue* queue, const RequestLimits& limits)
      : service(model, tokenizer, queue, limits) {
    transport::ServerOptions go;
    go.host = "127.0.0.1";
    go.port = 0;
    go.services = {&service};
    int port = 0;
    auto started = transport::StartServer(go, &port);
    if (!started.ok()) return;
    server = *std::move(started);
    channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials());
    stub = flotilla::v1::Generation::NewStub(channel);
  }
  ~GrpcFront() {
    if (server != nullptr) server->Shutdown();
  }
  GenerationService service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<flotilla::v1::Generation::Stub> stub;
};

namespace {

TEST_F(ServeTest, GrpcGenerateStreamsTheReference) {
  StartServer();
  RequestLimits limits;
  limits.max_prompt_tokens = 64;
  GrpcFront front(engine_->model.get(), tokenizer_.get(), queue_.get(), limits);
  ASSERT_NE(front.stub, nullptr);
  auto& stub = front.stub;
  std::ifstream in(ModelDir() + "/reference.json");
  const json ref = json::parse(in);
  const std::vector<int32_t> want_all = ref["cases"][0]["generated_ids"];
  {
    grpc::ClientContext ctx;
    flotilla::v1::GenerateRequest req;
    req.set_prompt("Once upon a time");
    req.set_max_tokens(25);
    auto reader = stub->Generate(&ctx, req);
    flotilla::v1::GenerateResponse r;
    std::vector<int32_t> ids;
    std::string text, finish;
    int messages = 0, finished_at = -1;
    while (reader->Read(&r)) {
      ++messages;
      ids.insert(ids.end(), r.token_ids().begin(), r.token_ids().end());
      text += r.text();
      if (!r.finish_reason().empty()) {
        finish = r.finish_reason();
        finished_at = messages;
        EXPECT_EQ(r.prompt_tokens(), 5);
        EXPECT_EQ(r.completion_tokens(), 25);
      }
    }
    ASSERT_TRUE(reader->Finish().ok());
    // How many messages carry the 25 tokens depends on how fast they come
    // (a fast machine may have them all before the first write): only the
    // last one ends the stream.
    EXPECT_GE(messages, 1);
    EXPECT_EQ(finished_at, messages);
    EXPECT_EQ(ids,
              std::vector<int32_t>(want_all.begin(), want_all.begin() + 25));
    EXPECT_EQ(text, ReferenceText(25));
    EXPECT_EQ(finish, "length");
  }
  {
    grpc::ClientContext ctx;
    flotilla::v1::GenerateRequest req;
    req.add_prompt_ids(1);
    req.add_prompt_ids(9999);
    auto reader = stub->Generate(&ctx, req);
    flotilla::v1::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("9999"), std::string::npos);
  }
}

// gRPC text is valid UTF-8 (bytes that form no character are U+FFFD in
// `text`, exact in `raw_text`), and request strings that are not UTF-8 are
// INVALID_ARGUMENT naming the field (they reach the server as bytes), as
// is a request that does not parse at all.
TEST_F(ServeTest, GrpcTextIsValidUtf8AndBadStringsNameTheField) {
  StartServer();
  GrpcFront front(engine_->model.get(), tokenizer_.get(), queue_.get(),
                  RequestLimits());
  ASSERT_NE(front.stub, nullptr);
  auto& stub = front.stub;
  {
    // Byte tokens sampled hot: seed 0 makes one that starts no character.
    grpc::ClientContext ctx;
    flotilla::v1::GenerateRequest req;
    req.add_prompt_ids(1);
    req.add_prompt_ids(200);
    req.set_max_tokens(24);
    req.set_temperature(3);
    req.set_seed(0);
    auto reader = stub->Generate(&ctx, req);
    flotilla::v1::GenerateResponse r;
    std::string text, raw;
    while (reader->Read(&r)) {
      EXPECT_TRUE(tokenizer::IsValidUtf8(r.text()));
      text += r.text();
      raw += r.raw_text();
    }
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_FALSE(tokenizer::IsValidUtf8(raw)) << raw;
    EXPECT_EQ(text, tokenizer::ToValidUtf8(raw));
    EXPECT_NE(text.find("\xEF\xBF\xBD"), std::string::npos);
  }
  {
    // Bytes that are no GenerateRequest at all, sent raw.
    grpc::ClientContext ctx;
    const std::string junk = "\xff\xff\xff\xff";
    grpc::Slice slice(junk);
    const grpc::ByteBuffer request(&slice, 1);
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            front.channel.get(),
            grpc::internal::RpcMethod(
                "/flotilla.v1.Generation/Generate",
                grpc::internal::RpcMethod::SERVER_STREAMING),
            &ctx, request));
    grpc::ByteBuffer unused;
    while (reader->Read(&unused)) {
    }
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("not a flotilla.v1.GenerateRequest"),
              std::string::npos)
        << st.error_message();
  }
  for (const bool in_stop : {false, true}) {
    grpc::ClientContext ctx;
    flotilla::v1::GenerateRequest req;
    req.set_prompt(in_stop ? "Once" : "Once \xff\xfe");
    if (in_stop) req.add_stop("\xc3");
    auto reader = stub->Generate(&ctx, req);
    flotilla::v1::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find(in_stop ? "stop[0]" : "prompt"),
              std::string::npos)
        << st.error_message();
  }
}

}  // namespace
}  // namespace flotilla::coordinator::serve
