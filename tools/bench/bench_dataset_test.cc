#include "tools/bench/bench_dataset.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace pagellm::bench {
namespace {

DatasetOptions Random(int32_t n, int32_t in, int32_t out, double ratio = 0.0) {
  DatasetOptions o;
  o.num_prompts = n;
  o.input_len = in;
  o.output_len = out;
  o.range_ratio = ratio;
  o.vocab_size = 1000;
  o.seed = 5;
  return o;
}

TEST(BenchDatasetTest, RandomFixedLengthsWithoutRangeRatio) {
  auto r = MakeDataset(Random(50, 64, 32));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 50u);
  for (const BenchRequest& q : *r) {
    EXPECT_EQ(q.prompt_token_ids.size(), 64u);
    EXPECT_EQ(q.output_len, 32);
  }
}

TEST(BenchDatasetTest, RandomLengthsStayInTheRange) {
  auto r = MakeDataset(Random(2000, 100, 50, 0.5));
  ASSERT_TRUE(r.ok()) << r.status();
  int32_t in_lo = 1 << 30, in_hi = 0, out_lo = 1 << 30, out_hi = 0;
  for (const BenchRequest& q : *r) {
    const int32_t in = static_cast<int32_t>(q.prompt_token_ids.size());
    in_lo = std::min(in_lo, in), in_hi = std::max(in_hi, in);
    out_lo = std::min(out_lo, q.output_len), out_hi = std::max(out_hi, q.output_len);
  }
  // Uniform on [50, 150] and [25, 75]: 2000 draws reach both ends.
  EXPECT_EQ(in_lo, 50);
  EXPECT_EQ(in_hi, 150);
  EXPECT_EQ(out_lo, 25);
  EXPECT_EQ(out_hi, 75);
}

TEST(BenchDatasetTest, TokenIdsAvoidTheLowSpecialRange) {
  auto r = MakeDataset(Random(20, 500, 8));
  ASSERT_TRUE(r.ok());
  for (const BenchRequest& q : *r) {
    for (int32_t id : q.prompt_token_ids) {
      ASSERT_GE(id, 100);
      ASSERT_LT(id, 1000);
    }
  }
  DatasetOptions tiny = Random(2, 10, 2);
  tiny.vocab_size = 50;  // no room above 100: the whole vocabulary
  auto t = MakeDataset(tiny);
  ASSERT_TRUE(t.ok());
  for (int32_t id : (*t)[0].prompt_token_ids) EXPECT_LT(id, 50);
}

TEST(BenchDatasetTest, SameSeedSameRequests) {
  auto a = MakeDataset(Random(10, 30, 5, 0.3));
  auto b = MakeDataset(Random(10, 30, 5, 0.3));
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].prompt_token_ids, (*b)[i].prompt_token_ids);
    EXPECT_EQ((*a)[i].output_len, (*b)[i].output_len);
  }
}

TEST(BenchDatasetTest, ShareGptLikeMeansAndCap) {
  DatasetOptions o = Random(4000, 0, 0);
  o.kind = DatasetKind::kShareGptLike;
  o.max_model_len = 2048;
  auto r = MakeDataset(o);
  ASSERT_TRUE(r.ok()) << r.status();
  double in = 0, out = 0;
  for (const BenchRequest& q : *r) {
    ASSERT_GE(q.prompt_token_ids.size(), 1u);
    ASSERT_GE(q.output_len, 1);
    ASSERT_LE(static_cast<int64_t>(q.prompt_token_ids.size()) + q.output_len, 2048);
    in += q.prompt_token_ids.size();
    out += q.output_len;
  }
  EXPECT_NEAR(in / r->size(), 161.3, 161.3 * 0.1);
  EXPECT_NEAR(out / r->size(), 338.0, 338.0 * 0.1);

  o.max_model_len = 256;  // a small model: everything fits
  r = MakeDataset(o);
  ASSERT_TRUE(r.ok());
  for (const BenchRequest& q : *r) {
    ASSERT_LE(static_cast<int64_t>(q.prompt_token_ids.size()) + q.output_len, 256);
  }
}

TEST(BenchDatasetTest, RejectsBadOptions) {
  EXPECT_FALSE(MakeDataset(Random(0, 10, 10)).ok());
  EXPECT_FALSE(MakeDataset(Random(1, 0, 10)).ok());
  EXPECT_FALSE(MakeDataset(Random(1, 10, 0)).ok());
  EXPECT_FALSE(MakeDataset(Random(1, 10, 10, 1.0)).ok());
  EXPECT_FALSE(MakeDataset(Random(1, 10, 10, -0.1)).ok());
  DatasetOptions no_vocab = Random(1, 10, 10);
  no_vocab.vocab_size = 0;
  EXPECT_FALSE(MakeDataset(no_vocab).ok());
  DatasetOptions too_long = Random(1, 100, 50, 0.5);  // up to 150 + 75
  too_long.max_model_len = 200;
  EXPECT_EQ(MakeDataset(too_long).status().code(), absl::StatusCode::kInvalidArgument);
  too_long.max_model_len = 225;
  EXPECT_TRUE(MakeDataset(too_long).ok());
  EXPECT_FALSE(ParseDatasetKind("sharegpt").ok());
  EXPECT_EQ(*ParseDatasetKind("sharegpt-like"), DatasetKind::kShareGptLike);
}

}  // namespace
}  // namespace pagellm::bench
