// Paged attention against a float64 reference on fresh random inputs, over sweeps of block size,
// head dim, GQA ratio, context length (1 ... 32k), batch shape (decode rows, prefill chunks over a
// cached prefix, mixes), split count and pool layout. K/V slots nobody attends to hold random
// values too, so a kernel that reads past a context shows; outputs are poisoned before each run.
#include "kernels/cuda/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/testing/cuda_test_util.h"

namespace pagellm::kernels::cuda {
namespace {

using testing::DeviceArray;

struct Seq {
  int32_t context;  // tokens in the cache after the step
  int32_t step;     // of which the last `step` are this step's queries
};

struct Case {
  std::string name;
  int64_t head_dim = 128;
  int64_t block_size = 16;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  std::vector<Seq> seqs;
  int32_t forced_splits = 0;  // 0: PlanPagedAttention's choice
  bool interleaved = false;
  KvDtype dtype = KvDtype::kBF16;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PagedAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionTest, MatchesFloat64Reference) {
  PAGELLM_SKIP_WITHOUT_CUDA();
  const Case& c = GetParam();
  const KvDtype t = c.dtype;
  const int64_t d = c.head_dim, bs = c.block_size, heads = c.heads, kvh = c.kv_heads;
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>()(c.name)));

  // Sequences, their blocks (a shuffled pool) and this step's tokens.
  int64_t max_blocks = 0, total_blocks = 0, num_tokens = 0, max_context = 0;
  for (const Seq& s : c.seqs) {
    const int64_t b = (s.context + bs - 1) / bs;
    max_blocks = std::max(max_blocks, b);
    total_blocks += b;
    num_tokens += s.step;
    max_context = std::max<int64_t>(max_context, s.context);
  }
  const int64_t num_blocks = total_blocks + 3, table_stride = max_blocks + 1;
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  std::vector<int32_t> tables(c.seqs.size() * table_stride, 0), token_seq, positions;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const int64_t b = (c.seqs[s].context + bs - 1) / bs;
    for (int64_t i = 0; i < b; ++i) {
      tables[s * table_stride + i] = free_blocks.back();
      free_blocks.pop_back();
    }
    for (int32_t p = c.seqs[s].context - c.seqs[s].step; p < c.seqs[s].context; ++p) {
      token_seq.push_back(static_cast<int32_t>(s));
      positions.push_back(p);
    }
  }

  PagedKvLayer kv;
  kv.dtype = t;
  kv.block_size = bs;
  kv.num_kv_heads = kvh;
  kv.head_dim = d;
  kv.block_stride = c.interleaved ? 5 * kv.shape().block_elems() : 0;
  const int64_t pool_elems = num_blocks * kv.shape().stride();
  const std::vector<uint16_t> k_bits =
      testing::ToDeviceBits(t, testing::RandomValues(pool_elems, rng));
  const std::vector<uint16_t> v_bits =
      testing::ToDeviceBits(t, testing::RandomValues(pool_elems, rng));
  const int64_t q_stride = (heads + 2 * kvh) * d;
  const std::vector<uint16_t> q_bits =
      testing::ToDeviceBits(t, testing::RandomValues(num_tokens * q_stride, rng));
  DeviceArray<uint16_t> d_k(k_bits), d_v(v_bits), d_q(q_bits), d_out(num_tokens * heads * d);
  DeviceArray<int32_t> d_seq(token_seq), d_pos(positions), d_tables(tables);
  kv.k = d_k.get();
  kv.v = d_v.get();

  PagedAttentionParams p;
  p.q = d_q.get();
  p.q_stride = q_stride;
  p.out = d_out.get();
  p.out_stride = heads * d;
  p.kv = kv;
  p.token_seq = d_seq.get();
  p.positions = d_pos.get();
  p.block_tables = d_tables.get();
  p.block_table_stride = table_stride;
  p.num_tokens = num_tokens;
  p.num_heads = heads;
  p.scale = 1.0f / std::sqrt(static_cast<float>(d));
  if (c.forced_splits > 0) {
    const int64_t chunks = (max_context + kAttentionChunk - 1) / kAttentionChunk;
    const int64_t per = (chunks + c.forced_splits - 1) / c.forced_splits;
    p.plan.split_len = static_cast<int32_t>(per * kAttentionChunk);
    p.plan.num_splits = static_cast<int32_t>((chunks + per - 1) / per);
  } else {
    p.plan = PlanPagedAttention(num_tokens, heads, kvh, max_context, 132, 4096);
  }
  ASSERT_GE(static_cast<int64_t>(p.plan.num_splits) * p.plan.split_len, max_context);
  DeviceArray<float> d_ws(
      std::max<int64_t>(1, PagedAttentionWorkspaceFloats(num_tokens, heads, d, p.plan.num_splits)));
  d_ws.Poison();
  p.workspace = d_ws.get();
  d_out.Poison();
  ASSERT_CUDA_OK(LaunchPagedAttention(p, nullptr));
  const std::vector<float> got = testing::FromDeviceBits(t, d_out.Download());

  const std::vector<float> kf = testing::FromDeviceBits(t, k_bits);
  const std::vector<float> vf = testing::FromDeviceBits(t, v_bits);
  const std::vector<float> qf = testing::FromDeviceBits(t, q_bits);
  std::vector<double> want(num_tokens * heads * d, 0.0);
  const PagedKvShape shape = kv.shape();
  for (int64_t tok = 0; tok < num_tokens; ++tok) {
    const int32_t* table = tables.data() + token_seq[tok] * table_stride;
    const int64_t ctx = positions[tok] + 1;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / kvh);
      const float* q = qf.data() + tok * q_stride + h * d;
      std::vector<double> s(ctx);
      double mx = -INFINITY;
      for (int64_t pos = 0; pos < ctx; ++pos) {
        const int64_t slot = static_cast<int64_t>(table[pos / bs]) * bs + pos % bs;
        const float* k = kf.data() + shape.offset(slot, g);
        double dot = 0.0;
        for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(q[j]) * k[j];
        s[pos] = dot / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, s[pos]);
      }
      double sum = 0.0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      double* o = want.data() + (tok * heads + h) * d;
      for (int64_t pos = 0; pos < ctx; ++pos) {
        const int64_t slot = static_cast<int64_t>(table[pos / bs]) * bs + pos % bs;
        const float* v = vf.data() + shape.offset(slot, g);
        for (int64_t j = 0; j < d; ++j) o[j] += s[pos] / sum * v[j];
      }
    }
  }
  EXPECT_LT(testing::RelativeError(got, want), testing::kHalfTolerance)
      << c.name << ": " << p.plan.num_splits << " splits of " << p.plan.split_len;

  // The same step as the CUDA backend runs it: prefill chunks on tensor cores
  // (prefill_attention.h), the other tokens through `tokens` of this kernel.
  const int tile_tokens = PrefillTileTokens(heads, kvh);
  ASSERT_GT(tile_tokens, 0);
  std::vector<int32_t> query_start = {0};
  for (const Seq& s : c.seqs) query_start.push_back(query_start.back() + s.step);
  std::vector<PrefillTile> tiles;
  std::vector<int32_t> other;
  SplitAttentionStep(query_start.data(), c.seqs.size(), tile_tokens, &tiles, &other);
  int64_t split_tokens = other.size();
  for (const PrefillTile& tile : tiles) {
    ASSERT_LE(tile.num_tokens, tile_tokens);
    split_tokens += tile.num_tokens;
  }
  ASSERT_EQ(split_tokens, num_tokens);
  auto tiles_bytes = std::make_unique<DeviceArray<uint8_t>>(
      std::max<size_t>(1, tiles.size() * sizeof(PrefillTile)));
  ASSERT_EQ(cudaMemcpy(tiles_bytes->get(), tiles.data(), tiles.size() * sizeof(PrefillTile),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  DeviceArray<int32_t> d_other(std::max<size_t>(1, other.size()));
  if (!other.empty()) d_other.Upload(other);
  PrefillAttentionParams pp;
  pp.q = p.q;
  pp.q_stride = p.q_stride;
  pp.out = p.out;
  pp.out_stride = p.out_stride;
  pp.kv = kv;
  pp.token_seq = p.token_seq;
  pp.positions = p.positions;
  pp.block_tables = p.block_tables;
  pp.block_table_stride = p.block_table_stride;
  pp.tiles = reinterpret_cast<const PrefillTile*>(tiles_bytes->get());
  pp.num_tiles = tiles.size();
  pp.num_heads = heads;
  pp.scale = p.scale;
  d_out.Poison();
  ASSERT_CUDA_OK(LaunchPrefillAttention(pp, nullptr));
  p.tokens = d_other.get();
  p.num_tokens = other.size();
  p.plan = PlanPagedAttention(p.num_tokens, heads, kvh, max_context, 132, 4096);
  // Fewer tokens than the first launch may mean more splits: a workspace for this plan.
  DeviceArray<float> d_ws_split(std::max<int64_t>(
      1, PagedAttentionWorkspaceFloats(p.num_tokens, heads, d, p.plan.num_splits)));
  d_ws_split.Poison();
  p.workspace = d_ws_split.get();
  ASSERT_CUDA_OK(LaunchPagedAttention(p, nullptr));
  const std::vector<float> got_split = testing::FromDeviceBits(t, d_out.Download());
  EXPECT_LT(testing::RelativeError(got_split, want), testing::kHalfTolerance)
      << c.name << ": " << tiles.size() << " tiles of " << tile_tokens << " tokens, "
      << other.size() << " other tokens";
}

std::vector<Seq> Decode(std::vector<int32_t> contexts) {
  std::vector<Seq> s;
  for (int32_t c : contexts) s.push_back({c, 1});
  return s;
}

std::vector<Seq> RandomDecode(int n, int32_t max_context, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Seq> s;
  for (int i = 0; i < n; ++i) s.push_back({static_cast<int32_t>(1 + rng() % max_context), 1});
  return s;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (int32_t ctx : {1, 17, 255, 256, 257, 1000, 4096, 32768}) {
    Case c;
    c.name = "decode1_ctx" + std::to_string(ctx);
    c.seqs = Decode({ctx});
    cases.push_back(c);
  }
  for (int64_t bs : {8, 16, 32}) {
    for (int64_t d : {64, 128}) {
      Case c;
      c.name = "decode64_bs" + std::to_string(bs) + "_d" + std::to_string(d);
      c.block_size = bs;
      c.head_dim = d;
      c.heads = 16;
      c.kv_heads = 4;
      c.seqs = RandomDecode(64, 2000, static_cast<unsigned>(bs * d));
      cases.push_back(c);
    }
  }
  struct Ratio {
    int64_t heads, kv_heads;
  };
  for (Ratio r : {Ratio{16, 16}, Ratio{16, 8}, Ratio{28, 4}, Ratio{32, 2}}) {
    Case c;
    c.name = "gqa" + std::to_string(r.heads) + "x" + std::to_string(r.kv_heads);
    c.heads = r.heads;
    c.kv_heads = r.kv_heads;
    c.block_size = 32;
    c.seqs = Decode({3000, 5, 700});
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "prefill_chunk_over_cached_prefix";
    c.heads = 8;
    c.kv_heads = 2;
    c.seqs = {{700, 300}, {90, 1}, {1500, 1}};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "whole_prompt_d64";
    c.head_dim = 64;
    c.block_size = 8;
    c.heads = 8;
    c.kv_heads = 8;
    c.seqs = {{513, 513}};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "batch256_ctx1024";
    c.heads = 8;
    c.kv_heads = 2;
    c.seqs = Decode(std::vector<int32_t>(256, 1024));
    cases.push_back(c);
  }
  for (int32_t splits : {1, 3, 7, 64}) {
    Case c;
    c.name = "forced_splits" + std::to_string(splits);
    c.heads = 8;
    c.kv_heads = 2;
    c.seqs = {{16384, 1}, {300, 1}, {2, 2}};
    c.forced_splits = splits;
    cases.push_back(c);
  }
  // Prefill on tensor cores: whole prompts and chunks over cached prefixes, tile edges, GQA
  // ratios 1 to 16, block sizes 8 to 32, head dims 64 and 128.
  for (Ratio r : {Ratio{16, 16}, Ratio{16, 8}, Ratio{28, 4}, Ratio{32, 4}, Ratio{32, 2}}) {
    for (int64_t bs : {8, 32}) {
      for (int64_t d : {64, 128}) {
        Case c;
        c.name = "prefill_gqa" + std::to_string(r.heads) + "x" + std::to_string(r.kv_heads) +
                 "_bs" + std::to_string(bs) + "_d" + std::to_string(d);
        c.heads = r.heads;
        c.kv_heads = r.kv_heads;
        c.block_size = bs;
        c.head_dim = d;
        c.seqs = {{200, 200}, {600, 70}, {64, 64}, {17, 1}, {65, 3}};
        cases.push_back(c);
      }
    }
  }
  {
    Case c;
    c.name = "prefill_chunk_over_16k_prefix";
    c.heads = 8;
    c.kv_heads = 2;
    c.seqs = {{16384 + 128, 128}};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "prefill_1024_fp16";
    c.dtype = KvDtype::kF16;
    c.heads = 8;
    c.kv_heads = 2;
    c.seqs = {{1024, 1024}};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "interleaved_pool";
    c.interleaved = true;
    c.seqs = {{2000, 1}, {400, 40}};
    cases.push_back(c);
  }
  {
    Case c;
    c.name = "fp16";
    c.dtype = KvDtype::kF16;
    c.seqs = {{5000, 1}, {300, 20}};
    cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, PagedAttentionTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(PlanPagedAttentionTest, SplitsOnlyWhenTheStepIsSmall) {
  // One long decode row: many splits, each at least a chunk, covering the context.
  PagedAttentionPlan p = PlanPagedAttention(1, 32, 8, 32768, 132, 4096);
  EXPECT_GT(p.num_splits, 1);
  EXPECT_LE(p.num_splits, kMaxAttentionSplits);
  EXPECT_GE(static_cast<int64_t>(p.num_splits) * p.split_len, 32768);
  EXPECT_EQ(p.split_len % kAttentionChunk, 0);
  // 256 rows of 8 KV heads already fill the chip: one split.
  EXPECT_EQ(PlanPagedAttention(256, 32, 8, 1024, 132, 4096).num_splits, 1);
  // A short context never splits.
  EXPECT_EQ(PlanPagedAttention(1, 32, 8, 200, 132, 4096).num_splits, 1);
  // The workspace bound caps (token, split) pairs.
  p = PlanPagedAttention(8, 8, 1, 32768, 132, 16);
  EXPECT_LE(8 * p.num_splits, 16);
}

TEST(PagedAttentionLaunchTest, RefusesUnsupportedShapes) {
  PagedAttentionParams p;
  p.num_tokens = 1;
  p.num_heads = 8;
  p.kv.num_kv_heads = 3;  // does not divide
  p.kv.head_dim = 128;
  EXPECT_EQ(LaunchPagedAttention(p, nullptr), cudaErrorInvalidValue);
  p.kv.num_kv_heads = 2;
  p.kv.head_dim = 96;
  EXPECT_EQ(LaunchPagedAttention(p, nullptr), cudaErrorInvalidValue);
  p.kv.head_dim = 128;
  p.plan.num_splits = 2;  // no workspace
  EXPECT_EQ(LaunchPagedAttention(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
