// The naming table: every scheme builds and parses its own names, and names
// that only look like routed experts are not taken for them.
#include "shared/model/tensor_names.h"

#include <string>

#include "gtest/gtest.h"

namespace flotilla::model {
namespace {

TEST(TensorNamesTest, EachSchemeParsesWhatItBuilds) {
  for (const ExpertScheme* scheme : kExpertSchemes) {
    const ExpertNaming naming{"language_model.model.", scheme};
    for (int which = 0; which < 3; ++which) {
      const std::string name =
          ExpertMatrixPrefix(naming, 12, 345, which) + "weight_scale_inv";
      ExpertTensorName n;
      ASSERT_TRUE(ParseExpertTensorName(name, &n)) << name;
      EXPECT_EQ(n.naming.prefix, "language_model.model.");
      EXPECT_EQ(n.naming.scheme, scheme) << name;
      EXPECT_EQ(n.layer, 12);
      EXPECT_EQ(n.expert, 345);
      EXPECT_EQ(n.which, which);
      EXPECT_EQ(n.suffix, "weight_scale_inv");
    }
  }
}

TEST(TensorNamesTest, TheReleasedSpellings) {
  EXPECT_EQ(ExpertMatrixPrefix({"model.", &kBlockSparseMoeExperts}, 1, 7, 0),
            "model.layers.1.block_sparse_moe.experts.7.w1.");
  EXPECT_EQ(ExpertMatrixPrefix({"model.", &kMlpExperts}, 3, 0, 1),
            "model.layers.3.mlp.experts.0.down_proj.");
  ExpertTensorName n;
  ASSERT_TRUE(
      ParseExpertTensorName("model.layers.2.mlp.experts.5.up_proj.weight", &n));
  EXPECT_EQ(n.which, 2);
  EXPECT_EQ(n.naming.scheme, &kMlpExperts);
  // Another part of an expert: which -1, the rest kept.
  ASSERT_TRUE(ParseExpertTensorName(
      "model.layers.2.block_sparse_moe.experts.5.extra.bias", &n));
  EXPECT_EQ(n.which, -1);
  EXPECT_EQ(n.suffix, "extra.bias");
}

TEST(TensorNamesTest, LookAlikesAreNotRoutedExperts) {
  ExpertTensorName n;
  for (const char* name : {
           // DeepSeek-V3's shared expert and dense MLP, the router.
           "model.layers.3.mlp.shared_experts.gate_proj.weight",
           "model.layers.0.mlp.gate_proj.weight",
           "model.layers.3.mlp.gate.weight",
           // gpt-oss keeps every expert of a layer in one fused tensor.
           "model.layers.1.mlp.experts.gate_up_proj_blocks",
           // Not decimal, signed, too long, no layer, empty rest.
           "model.layers.x.mlp.experts.1.gate_proj.weight",
           "model.layers.1.mlp.experts.-1.gate_proj.weight",
           "model.layers.1.mlp.experts.1234567890.gate_proj.weight",
           "model.mlp.experts.1.gate_proj.weight",
           "model.layers.1.mlp.experts.1.",
           "model.xlayers.1.mlp.experts.1.up_proj.weight",
       }) {
    EXPECT_FALSE(ParseExpertTensorName(name, &n)) << name;
  }
  // A matrix name must be followed by a part.
  ASSERT_TRUE(
      ParseExpertTensorName("model.layers.1.mlp.experts.1.gate_proj", &n));
  EXPECT_EQ(n.which, -1);
}

}  // namespace
}  // namespace flotilla::model
