#include "shared/transport/reflection_answers.h"

#include <google/protobuf/descriptor.pb.h>

#include <set>
#include <string>
#include <vector>

#include "flotilla/v1/expert.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::transport {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A ServerReflectionRequest with host "h" and one request kind.
std::string Request(int kind, const std::string& value) {
  std::string r;
  AppendLengthDelimited(1, "h", &r);
  AppendLengthDelimited(kind, value, &r);
  return r;
}

// The fields of `message` with number `number`, as bytes.
std::vector<std::string> Fields(const std::string& message, int number) {
  std::vector<WireField> fields;
  EXPECT_TRUE(ReadFields(message, &fields));
  std::vector<std::string> out;
  for (const WireField& f : fields) {
    if (f.number == number) out.emplace_back(f.bytes);
  }
  return out;
}

// The names of the files in a response's file_descriptor_response.
std::vector<std::string> FileNames(const std::string& response) {
  std::vector<std::string> names;
  for (const std::string& files : Fields(response, 4)) {
    for (const std::string& bytes : Fields(files, 1)) {
      google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      names.push_back(file.name());
    }
  }
  return names;
}

// (error_code, error_message) of a response's error_response.
std::pair<uint64_t, std::string> ErrorOf(const std::string& response) {
  const std::vector<std::string> errors = Fields(response, 7);
  if (errors.size() != 1) return {0, ""};
  std::vector<WireField> fields;
  EXPECT_TRUE(ReadFields(errors[0], &fields));
  std::pair<uint64_t, std::string> e;
  for (const WireField& f : fields) {
    if (f.number == 1) e.first = f.varint;
    if (f.number == 2) e.second = std::string(f.bytes);
  }
  return e;
}

TEST(ReflectionAnswersTest, EchoesHostAndRequestAndListsServices) {
  const std::string request = Request(7, "*");
  std::set<std::string> sent;
  const std::string response =
      AnswerReflectionRequest(request, {"a.B", "c.D"}, &sent);
  EXPECT_THAT(Fields(response, 1), ElementsAre("h"));
  EXPECT_THAT(Fields(response, 2), ElementsAre(request));
  const std::vector<std::string> list = Fields(response, 6);
  ASSERT_EQ(list.size(), 1u);
  std::vector<std::string> names;
  for (const std::string& service : Fields(list[0], 1)) {
    names.push_back(Fields(service, 1).at(0));
  }
  EXPECT_THAT(names, ElementsAre("a.B", "c.D"));
}

TEST(ReflectionAnswersTest, FileContainingSymbolIsTheProtoOfTheService) {
  // Referenced so that the linker keeps expert.proto's descriptor.
  EXPECT_NE(flotilla::v1::ComputeRequest::descriptor(), nullptr);
  std::set<std::string> sent;
  const std::string response = AnswerReflectionRequest(
      Request(4, "flotilla.v1.ExpertService"), {}, &sent);
  const std::vector<std::string> names = FileNames(response);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "flotilla/v1/expert.proto");
  // A method's full name finds the same file.
  EXPECT_EQ(
      FileNames(AnswerReflectionRequest(
                    Request(4, "flotilla.v1.ExpertService.Compute"), {}, &sent))
          .at(0),
      "flotilla/v1/expert.proto");
}

TEST(ReflectionAnswersTest, DependenciesAreSentOncePerStream) {
  // api.proto imports source_context.proto and type.proto, which imports
  // any.proto and source_context.proto.
  std::set<std::string> sent;
  const std::vector<std::string> first = FileNames(AnswerReflectionRequest(
      Request(3, "google/protobuf/api.proto"), {}, &sent));
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first[0], "google/protobuf/api.proto");
  EXPECT_EQ(
      std::set<std::string>(first.begin(), first.end()),
      (std::set<std::string>{
          "google/protobuf/api.proto", "google/protobuf/source_context.proto",
          "google/protobuf/type.proto", "google/protobuf/any.proto"}));
  // Asked again on the same stream: the file itself, no dependencies.
  EXPECT_THAT(FileNames(AnswerReflectionRequest(
                  Request(3, "google/protobuf/type.proto"), {}, &sent)),
              ElementsAre("google/protobuf/type.proto"));
}

TEST(ReflectionAnswersTest, ExtensionQueries) {
  // descriptor.proto declares no extensions of FileOptions itself.
  std::set<std::string> sent;
  const std::string numbers = AnswerReflectionRequest(
      Request(6, "google.protobuf.FileOptions"), {}, &sent);
  const std::vector<std::string> body = Fields(numbers, 5);
  ASSERT_EQ(body.size(), 1u);
  EXPECT_THAT(Fields(body[0], 1), ElementsAre("google.protobuf.FileOptions"));

  std::string extension;
  AppendLengthDelimited(1, "google.protobuf.FileOptions", &extension);
  AppendVarint(2, 123456, &extension);
  const auto error =
      ErrorOf(AnswerReflectionRequest(Request(5, extension), {}, &sent));
  EXPECT_EQ(error.first, 5u);  // NOT_FOUND
  EXPECT_THAT(error.second, HasSubstr("FileOptions #123456"));
}

TEST(ReflectionAnswersTest, ErrorsNameWhatWasWrong) {
  std::set<std::string> sent;
  auto error =
      ErrorOf(AnswerReflectionRequest(Request(4, "no.Such"), {}, &sent));
  EXPECT_EQ(error.first, 5u);  // NOT_FOUND
  EXPECT_THAT(error.second, HasSubstr("no.Such"));

  error =
      ErrorOf(AnswerReflectionRequest(Request(3, "no/such.proto"), {}, &sent));
  EXPECT_EQ(error.first, 5u);
  EXPECT_THAT(error.second, HasSubstr("no/such.proto"));

  std::string host_only;
  AppendLengthDelimited(1, "h", &host_only);
  EXPECT_EQ(ErrorOf(AnswerReflectionRequest(host_only, {}, &sent)).first,
            12u);  // UNIMPLEMENTED

  // A length running past the end of the message.
  EXPECT_EQ(ErrorOf(AnswerReflectionRequest(std::string("\x22\x7f"
                                                        "ab",
                                                        4),
                                            {}, &sent))
                .first,
            3u);  // INVALID_ARGUMENT
}

TEST(ReadFieldsTest, ReadsVarintsAndBytesAndRefusesTruncation) {
  std::string m;
  AppendVarint(1, 300, &m);
  AppendLengthDelimited(2, "xyz", &m);
  std::vector<WireField> fields;
  ASSERT_TRUE(ReadFields(m, &fields));
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0].number, 1);
  EXPECT_EQ(fields[0].varint, 300u);
  EXPECT_EQ(fields[1].number, 2);
  EXPECT_EQ(fields[1].bytes, "xyz");
  EXPECT_FALSE(ReadFields(m.substr(0, m.size() - 1), &fields));
  EXPECT_FALSE(ReadFields(std::string("\x08", 1), &fields));  // no value
  EXPECT_TRUE(ReadFields("", &fields));
  EXPECT_TRUE(fields.empty());
}

}  // namespace
}  // namespace flotilla::transport
