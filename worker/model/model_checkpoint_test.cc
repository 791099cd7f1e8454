// The canonical tensor list and its checks, on small random checkpoints.
#include "worker/model/model_checkpoint.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/model/testing/tiny_model.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelConfig Tiny(bool bias = false, bool tied = true) {
  return testing::TinyLlamaConfig(2, bias, tied);
}

TEST(ModelCheckpointTest, TheConfigImpliesEveryCanonicalTensor) {
  // Per layer: two norms, q/k/v/o and gate/up/down; around them the embedding and final norm;
  // the biases only with attention_bias; lm_head and rope_freqs optional.
  EXPECT_EQ(LlamaTensorSpecs(Tiny()).size(), 2 + 2 * 9 + 2u);
  EXPECT_EQ(LlamaTensorSpecs(Tiny(/*bias=*/true)).size(), 2 + 2 * 12 + 2u);
  EXPECT_EQ(LlamaTensorName(1, "mlp.up_proj.weight"), "model.layers.1.mlp.up_proj.weight");
  for (const LlamaTensorSpec& s : LlamaTensorSpecs(Tiny())) {
    if (s.name == "model.layers.0.self_attn.k_proj.weight") {
      EXPECT_THAT(s.shape, ElementsAre(16, 32));  // 2 KV heads of 8
      EXPECT_EQ(s.shard, ShardDim::kRows);
    }
    if (s.name == "model.layers.0.mlp.down_proj.weight") {
      EXPECT_EQ(s.shard, ShardDim::kColumns);
    }
    if (s.name == "lm_head.weight") {
      EXPECT_TRUE(s.optional);  // tied
    }
  }
}

TEST(ModelCheckpointTest, DummyCheckpointsPassTheirOwnChecks) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0}) {
    SCOPED_TRACE(GetGgmlTypeTraits(type).name);
    absl::StatusOr<std::unique_ptr<ModelCheckpoint>> c =
        MakeDummyCheckpoint(Tiny(/*bias=*/true, /*tied=*/false), type, 7);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(CheckLlamaTensors(**c).ok());
    EXPECT_EQ((*c)->tensors.Find("model.layers.1.self_attn.q_proj.weight")->dtype, type);
    EXPECT_EQ((*c)->tensors.Find("model.norm.weight")->dtype, GgmlType::kF32);
    EXPECT_NE((*c)->tensors.Find("lm_head.weight"), nullptr);
  }
  EXPECT_FALSE(MakeDummyCheckpoint(Tiny(), GgmlType::kQ6_K, 7).ok());
}

TEST(ModelCheckpointTest, ChecksNameWhatIsMissingOrMisshapen) {
  absl::StatusOr<std::unique_ptr<ModelCheckpoint>> full =
      MakeDummyCheckpoint(Tiny(), GgmlType::kF32, 1);
  ASSERT_TRUE(full.ok());
  // Copy every tensor but one into a new checkpoint; then one with a wrong shape.
  auto without = [&](const std::string& skip, const std::string& reshape) {
    ModelCheckpoint c;
    c.config = (*full)->config;
    for (const std::string& name : (*full)->tensors.Names()) {
      if (name == skip) continue;
      TensorView v = *(*full)->tensors.Find(name);
      if (name == reshape) v.shape = {v.shape[0] / 2, v.shape[1]};
      EXPECT_TRUE(c.tensors.Add(name, v).ok());
    }
    return CheckLlamaTensors(c);
  };
  EXPECT_TRUE(without("", "").ok());
  const absl::Status missing = without("model.layers.1.mlp.gate_proj.weight", "");
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("missing tensor model.layers.1.mlp.gate_proj.weight"));
  const absl::Status shape = without("", "model.layers.0.self_attn.o_proj.weight");
  EXPECT_THAT(std::string(shape.message()), HasSubstr("has shape [16, 32], expected [32, 32]"));
}

TEST(ModelCheckpointTest, ShardsFollowMegatron) {
  absl::StatusOr<std::unique_ptr<ModelCheckpoint>> c =
      MakeDummyCheckpoint(Tiny(/*bias=*/true), GgmlType::kF32, 3);
  ASSERT_TRUE(c.ok());
  const ShardSpec rank1{.rank = 1, .world_size = 2};
  absl::StatusOr<TensorView> q = LlamaShard(**c, "model.layers.0.self_attn.q_proj.weight", rank1);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_THAT(q->shape, ElementsAre(16, 32));
  absl::StatusOr<TensorView> bias = LlamaShard(**c, "model.layers.0.self_attn.q_proj.bias", rank1);
  ASSERT_TRUE(bias.ok()) << bias.status();
  EXPECT_THAT(bias->shape, ElementsAre(16));
  absl::StatusOr<TensorView> o = LlamaShard(**c, "model.layers.0.self_attn.o_proj.weight", rank1);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->shape, ElementsAre(32, 16));
  EXPECT_FALSE(o->contiguous());
  absl::StatusOr<TensorView> norm = LlamaShard(**c, "model.norm.weight", rank1);
  ASSERT_TRUE(norm.ok());
  EXPECT_THAT(norm->shape, ElementsAre(32));
  EXPECT_FALSE(
      LlamaShard(**c, "model.layers.0.self_attn.q_proj.weight", {.rank = 0, .world_size = 3}).ok());
  EXPECT_FALSE(LlamaShard(**c, "not.a.tensor", rank1).ok());
}

}  // namespace
}  // namespace pagellm
