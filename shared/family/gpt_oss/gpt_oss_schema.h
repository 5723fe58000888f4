// The trunk regions of a gpt-oss pack, field by field (pack::FieldSpec):
// one region per layer (norms; q/k/v/o with their biases; the attention
// sinks; the router and its bias), "globals" (the final norm), "embed" and
// "lm_head". The fused MXFP4 experts are not trunk.
#ifndef FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_SCHEMA_H_
#define FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_SCHEMA_H_

#include <vector>

#include "shared/family/gpt_oss/gpt_oss_config.h"
#include "shared/pack/trunk_schema.h"

namespace flotilla::family::gpt_oss {

std::vector<pack::FieldSpec> LayerSchema(const model::GptOssConfig& config,
                                         int layer);
std::vector<pack::FieldSpec> GlobalsSchema(const model::GptOssConfig& config);
std::vector<pack::FieldSpec> VocabSchema(const model::GptOssConfig& config,
                                         bool lm_head);

}  // namespace flotilla::family::gpt_oss

#endif  // FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_SCHEMA_H_
