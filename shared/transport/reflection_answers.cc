#include "shared/transport/reflection_answers.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flotilla::transport {
namespace {

namespace pb = google::protobuf;
using WFL = pb::internal::WireFormatLite;

// ServerReflectionRequest and ServerReflectionResponse field numbers
// (reflection.proto, identical in v1alpha and v1).
enum RequestField {
  kHost = 1,
  kFileByFilename = 3,
  kFileContainingSymbol = 4,
  kFileContainingExtension = 5,
  kAllExtensionNumbersOfType = 6,
  kListServices = 7,
};
enum ResponseField {
  kValidHost = 1,
  kOriginalRequest = 2,
  kFileDescriptorResponse = 4,
  kAllExtensionNumbersResponse = 5,
  kListServicesResponse = 6,
  kErrorResponse = 7,
};
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcUnimplemented = 12;

std::string Error(int code, std::string_view message) {
  std::string e;
  AppendVarint(1, static_cast<uint64_t>(code), &e);
  AppendLengthDelimited(2, message, &e);
  std::string out;
  AppendLengthDelimited(kErrorResponse, e, &out);
  return out;
}

// `file` and its transitive dependencies not in `sent`, requested first.
void AddFile(const pb::FileDescriptor* file, std::set<std::string>* sent,
             std::string* files) {
  if (!sent->insert(file->name()).second) return;
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  AppendLengthDelimited(1, proto.SerializeAsString(), files);
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFile(file->dependency(i), sent, files);
  }
}

std::string Files(const pb::FileDescriptor* file, std::set<std::string>* sent) {
  std::string files;
  // A file sent before is sent again when asked for by itself, so that
  // every answer names the file that was asked for.
  sent->erase(file->name());
  AddFile(file, sent, &files);
  std::string out;
  AppendLengthDelimited(kFileDescriptorResponse, files, &out);
  return out;
}

// The message_response part of the answer to one request field.
std::string Answer(const WireField& f, const std::vector<std::string>& services,
                   std::set<std::string>* sent) {
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  const std::string name(f.bytes);
  switch (f.number) {
    case kListServices: {
      std::string list;
      for (const std::string& s : services) {
        std::string service;
        AppendLengthDelimited(1, s, &service);
        AppendLengthDelimited(1, service, &list);
      }
      std::string out;
      AppendLengthDelimited(kListServicesResponse, list, &out);
      return out;
    }
    case kFileByFilename:
      if (const pb::FileDescriptor* file = pool->FindFileByName(name)) {
        return Files(file, sent);
      }
      return Error(kGrpcNotFound, absl::StrCat("file not found: ", name));
    case kFileContainingSymbol:
      if (const pb::FileDescriptor* file =
              pool->FindFileContainingSymbol(name)) {
        return Files(file, sent);
      }
      return Error(kGrpcNotFound, absl::StrCat("symbol not found: ", name));
    case kFileContainingExtension: {
      std::vector<WireField> ext;
      std::string type;
      int64_t number = -1;
      if (!ReadFields(f.bytes, &ext)) {
        return Error(kGrpcInvalidArgument, "unreadable extension request");
      }
      for (const WireField& e : ext) {
        if (e.number == 1 && e.length_delimited) type = std::string(e.bytes);
        if (e.number == 2 && !e.length_delimited) {
          number = static_cast<int32_t>(e.varint);
        }
      }
      const pb::Descriptor* message = pool->FindMessageTypeByName(type);
      const pb::FieldDescriptor* field =
          message == nullptr || number < 0
              ? nullptr
              : pool->FindExtensionByNumber(message, static_cast<int>(number));
      if (field == nullptr) {
        return Error(kGrpcNotFound,
                     absl::StrCat("extension not found: ", type, " #", number));
      }
      return Files(field->file(), sent);
    }
    case kAllExtensionNumbersOfType: {
      const pb::Descriptor* message = pool->FindMessageTypeByName(name);
      if (message == nullptr) {
        return Error(kGrpcNotFound, absl::StrCat("type not found: ", name));
      }
      std::vector<const pb::FieldDescriptor*> extensions;
      pool->FindAllExtensions(message, &extensions);
      std::string numbers, body;
      for (const pb::FieldDescriptor* e : extensions) {
        pb::io::StringOutputStream stream(&numbers);
        pb::io::CodedOutputStream coded(&stream);
        coded.WriteVarint32(static_cast<uint32_t>(e->number()));
      }
      AppendLengthDelimited(1, name, &body);
      AppendLengthDelimited(2, numbers, &body);  // packed int32
      std::string out;
      AppendLengthDelimited(kAllExtensionNumbersResponse, body, &out);
      return out;
    }
    default:
      return Error(kGrpcUnimplemented, "unknown reflection request kind");
  }
}

}  // namespace

void AppendLengthDelimited(int number, std::string_view value,
                           std::string* out) {
  pb::io::StringOutputStream stream(out);
  pb::io::CodedOutputStream coded(&stream);
  coded.WriteTag(WFL::MakeTag(number, WFL::WIRETYPE_LENGTH_DELIMITED));
  coded.WriteVarint32(static_cast<uint32_t>(value.size()));
  coded.WriteRaw(value.data(), static_cast<int>(value.size()));
}

void AppendVarint(int number, uint64_t value, std::string* out) {
  pb::io::StringOutputStream stream(out);
  pb::io::CodedOutputStream coded(&stream);
  coded.WriteTag(WFL::MakeTag(number, WFL::WIRETYPE_VARINT));
  coded.WriteVarint64(value);
}

bool ReadFields(std::string_view message, std::vector<WireField>* fields) {
  fields->clear();
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(message.data()),
                              static_cast<int>(message.size()));
  while (uint32_t tag = in.ReadTag()) {
    WireField f;
    f.number = WFL::GetTagFieldNumber(tag);
    switch (WFL::GetTagWireType(tag)) {
      case WFL::WIRETYPE_VARINT:
        if (!in.ReadVarint64(&f.varint)) return false;
        break;
      case WFL::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t size = 0;
        if (!in.ReadVarint32(&size) || size > message.size()) return false;
        const int at = in.CurrentPosition();
        if (!in.Skip(static_cast<int>(size))) return false;
        f.length_delimited = true;
        f.bytes = message.substr(static_cast<size_t>(at), size);
        break;
      }
      default:
        if (!WFL::SkipField(&in, tag)) return false;
        continue;
    }
    fields->push_back(f);
  }
  // ReadTag returns 0 at the end and on a malformed tag alike.
  return in.ConsumedEntireMessage() ||
         in.CurrentPosition() == static_cast<int>(message.size());
}

std::string AnswerReflectionRequest(std::string_view request,
                                    const std::vector<std::string>& services,
                                    std::set<std::string>* sent) {
  std::vector<WireField> fields;
  std::string out;
  const bool readable = ReadFields(request, &fields);
  std::string host;
  const WireField* kind = nullptr;
  for (const WireField& f : fields) {
    if (!f.length_delimited) continue;
    if (f.number == kHost) {
      host = std::string(f.bytes);
    } else if (f.number >= kFileByFilename && f.number <= kListServices) {
      kind = &f;  // a oneof: the last one wins, as in protobuf
    }
  }
  AppendLengthDelimited(kValidHost, host, &out);
  AppendLengthDelimited(kOriginalRequest, request, &out);
  if (!readable) {
    out += Error(kGrpcInvalidArgument, "unreadable ServerReflectionRequest");
  } else if (kind == nullptr) {
    out += Error(kGrpcUnimplemented, "no request kind set");
  } else {
    out += Answer(*kind, services, sent);
  }
  return out;
}

}  // namespace flotilla::transport
