// Model configurations for flotilla-tool synth: named presets, and writing a
// K3Config as config.json in the released nested form (text_config +
// text_config.linear_attn_config), which ParseK3Config reads back exactly.
#ifndef FLOTILLA_TOOLS_SYNTH_CONFIG_H_
#define FLOTILLA_TOOLS_SYNTH_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"

namespace flotilla::tools {

struct SynthPreset {
  const char* name;
  const char* description;
  // Whether writing it needs --force (it is too large to write by accident).
  bool needs_force;
};

// k3-tiny (ckpt_A's dimensions, ~4 MB), k3-bench (~9.3 GB, 24 layers at
// hidden 2048 for streaming benchmarks), k3-full (the real 93-layer model).
const std::vector<SynthPreset>& SynthPresets();

// The config of a preset; NotFound listing the presets for an unknown name.
absl::StatusOr<model::K3Config> SynthPresetConfig(const std::string& name);

// config.json text in the nested released form, including the keys the
// release has but the engine does not read (kda_layers, use_full_rank_gate,
// tie_word_embeddings, num_nextn_predict_layers, num_expert_group,
// quantization_config.group_size).
std::string NestedConfigJson(const model::K3Config& config);

// Checks what ParseK3Config does not but a checkpoint needs: MXFP4 widths
// (latent and expert widths) that are multiples of the 32-element group.
absl::Status CheckSynthesizable(const model::K3Config& config);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_SYNTH_CONFIG_H_
