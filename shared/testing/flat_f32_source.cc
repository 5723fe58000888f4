#include "shared/testing/flat_f32_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "shared/base/open_file.h"
#include "shared/base/status_macros.h"
#include "shared/model/tensor_names.h"

namespace flotilla::model {
namespace {

constexpr char kPrefix[] = "language_model.model.";

// Reference submodule names inside self_attn whose HF name is "<x>.weight".
constexpr const char* kAttnWeights[] = {
    "q_proj",    "k_proj",        "v_proj",        "g_proj",
    "o_proj",    "f_a_proj",      "f_b_proj",      "b_proj",
    "q_conv1d",  "k_conv1d",      "v_conv1d",      "o_norm",
    "q_a_proj",  "q_b_proj",      "q_a_layernorm", "kv_a_proj_with_mqa",
    "kv_b_proj", "kv_a_layernorm"};

// Reference MoE names (inside "mlp_") and their HF block_sparse_moe names.
struct MoeName {
  const char* flat;
  const char* hf;
};
constexpr MoeName kMoeNames[] = {
    {"gate_weight", "gate.weight"},
    {"e_score_correction_bias", "gate.e_score_correction_bias"},
    {"down_weight", "routed_expert_down_proj.weight"},
    {"up_weight", "routed_expert_up_proj.weight"},
    {"norm_weight", "routed_expert_norm.weight"},
    {"shared_w1_weight", "shared_experts.gate_proj.weight"},
    {"shared_w3_weight", "shared_experts.up_proj.weight"},
    {"shared_w2_weight", "shared_experts.down_proj.weight"},
};

constexpr const char* kLayerVectors[] = {"input_layernorm",
                                         "post_attention_layernorm",
                                         "self_attention_res_norm",
                                         "self_attention_res_proj",
                                         "mlp_res_norm",
                                         "mlp_res_proj"};

}  // namespace

std::string FlatLayerNameToHf(const std::string& name, int layer,
                              bool dense_ffn) {
  const std::string lp = absl::StrCat(kPrefix, "layers.", layer, ".");
  for (const char* v : kLayerVectors) {
    if (name == absl::StrCat(v, "_weight"))
      return absl::StrCat(lp, v, ".weight");
  }
  if (absl::StartsWith(name, "self_attn_")) {
    const std::string rest = name.substr(strlen("self_attn_"));
    if (rest == "A_log" || rest == "dt_bias") {
      return absl::StrCat(lp, "self_attn.", rest);
    }
    for (const char* w : kAttnWeights) {
      if (rest == absl::StrCat(w, "_weight")) {
        return absl::StrCat(lp, "self_attn.", w, ".weight");
      }
    }
    return "";
  }
  if (!absl::StartsWith(name, "mlp_")) return "";
  const std::string rest = name.substr(strlen("mlp_"));
  if (dense_ffn) {
    for (const char* w : {"gate_proj", "up_proj", "down_proj"}) {
      if (rest == absl::StrCat(w, "_weight")) {
        return absl::StrCat(lp, "mlp.", w, ".weight");
      }
    }
    return "";
  }
  for (const MoeName& m : kMoeNames) {
    if (rest == m.flat) return absl::StrCat(lp, "block_sparse_moe.", m.hf);
  }
  // experts_<e>_<w1|w2|w3>_weight
  std::vector<std::string> parts = absl::StrSplit(rest, '_');
  int expert = 0;
  if (parts.size() == 4 && parts[0] == "experts" &&
      absl::SimpleAtoi(parts[1], &expert) && parts[3] == "weight" &&
      (parts[2] == "w1" || parts[2] == "w2" || parts[2] == "w3")) {
    return ExpertMatrixPrefix({kPrefix}, layer, expert, parts[2][1] - '1') +
           "weight";
  }
  return "";
}

std::string FlatNameToHf(const std::string& flat_name, int dense_layers) {
  if (flat_name == "embed_tokens_weight") {
    return absl::StrCat(kPrefix, "embed_tokens.weight");
  }
  if (flat_name == "lm_head_weight") return "language_model.lm_head.weight";
  for (const char* v :
       {"norm", "output_attn_res_norm", "output_attn_res_proj"}) {
    if (flat_name == absl::StrCat(v, "_weight")) {
      return absl::StrCat(kPrefix, v, ".weight");
    }
  }
  if (!absl::StartsWith(flat_name, "layers_")) return "";
  const size_t num_end = flat_name.find('_', strlen("layers_"));
  if (num_end == std::string::npos) return "";
  int layer = 0;
  if (!absl::SimpleAtoi(
          flat_name.substr(strlen("layers_"), num_end - strlen("layers_")),
          &layer)) {
    return "";
  }
  return FlatLayerNameToHf(flat_name.substr(num_end + 1), layer,
                           layer < dense_layers);
}

void MemoryTensorSource::Add(const std::string& hf_name,
                             std::vector<int64_t> shape,
                             std::vector<float> data) {
  TensorInfo info;
  info.name = hf_name;
  info.dtype = DType::kF32;
  info.shape = std::move(shape);
  info.file = "<memory>";
  info.nbytes = data.size() * sizeof(float);
  infos_[hf_name] = std::move(info);
  data_[hf_name] = std::move(data);
}

const TensorInfo* MemoryTensorSource::Find(absl::string_view name) const {
  auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

std::vector<std::string> MemoryTensorSource::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, info] : infos_) names.push_back(name);
  return names;
}

absl::Status MemoryTensorSource::ReadRaw(const TensorInfo& info,
                                         void* dst) const {
  auto it = data_.find(info.name);
  if (it == data_.end()) {
    return absl::NotFoundError(absl::StrCat("no tensor ", info.name));
  }
  std::memcpy(dst, it->second.data(), it->second.size() * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FlatF32Source>> FlatF32Source::Open(
    const std::string& index_json, const std::string& bin) {
  std::ifstream in(index_json, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", index_json));
  std::stringstream buf;
  buf << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(buf.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tensors") ||
      !j["tensors"].is_object() || !j.contains("config") ||
      !j["config"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_json, ": not a flat-f32 index (needs objects config, tensors)"));
  }
  struct stat st;
  if (stat(bin.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot stat ", bin, ": ", std::strerror(errno)));
  }
  const uint64_t file_floats = static_cast<uint64_t>(st.st_size) / 4;
  int dense_layers = 0;
  if (j["config"].contains("first_k_dense_replace") &&
      j["config"]["first_k_dense_replace"].is_number_integer()) {
    dense_layers = j["config"]["first_k_dense_replace"].get<int>();
  }
  auto source = std::unique_ptr<FlatF32Source>(new FlatF32Source());
  source->config_json_ = j["config"].dump();
  for (const auto& [flat_name, t] : j["tensors"].items()) {
    if (!t.is_object() || !t.contains("offset") || !t.contains("shape") ||
        !t["offset"].is_number_unsigned() || !t["shape"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          index_json, ": tensor ", flat_name, " lacks offset/shape"));
    }
    TensorInfo info;
    info.dtype = DType::kF32;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned()) {
        return absl::InvalidArgumentError(absl::StrCat(
            index_json, ": tensor ", flat_name, " has a bad shape"));
      }
      info.shape.push_back(d.get<int64_t>());
    }
    const uint64_t offset = t["offset"].get<uint64_t>();
    const uint64_t numel = static_cast<uint64_t>(info.numel());
    if (offset > file_floats || numel > file_floats - offset) {
      return absl::OutOfRangeError(absl::StrCat(
          bin, ": tensor ", flat_name, " (", numel, " floats at element ",
          offset, ") runs past the end of the file (", file_floats,
          " floats)"));
    }
    info.file = bin;
    info.offset = offset * 4;
    info.nbytes = numel * 4;
    info.name = FlatNameToHf(flat_name, dense_layers);
    if (info.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_json, ": unknown tensor name ", flat_name));
    }
    source->tensors_[info.name] = info;
  }
  return source;
}

const TensorInfo* FlatF32Source::Find(absl::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> FlatF32Source::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, info] : tensors_) names.push_back(name);
  return names;
}

absl::Status FlatF32Source::ReadRaw(const TensorInfo& info, void* dst) const {
  FLOTILLA_ASSIGN_OR_RETURN(const int fd, base::OpenForRead(info.file));
  uint64_t done = 0;
  char* out = static_cast<char*>(dst);
  while (done < info.nbytes) {
    const ssize_t n = ::pread(fd, out + done, info.nbytes - done,
                              static_cast<off_t>(info.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat(info.file, ": short read of tensor ", info.name,
                       " at offset ", info.offset + done));
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace flotilla::model
