// PagedAttention for batched decode against the memory ceiling (kernels_cpu_peak_bench): one
// query token per sequence, SmolLM2-135M's heads (9 query heads over 3 KV heads of 64) or a
// 7B-class shape (32 over 8 of 128), fp16 K/V in 16-token blocks shuffled over a pool far larger
// than the caches, as a serving engine's cache is after a while. The counter is K/V bytes read
// per second (every position's K and V row once per KV head): decode attention is a stream over
// the cache, so the read bandwidth is its floor.
//
// BM_PrefillAttention: one prompt's causal attention, `chunk` queries (the last of a prompt of
// `ctx` tokens, as a chunked prefill's step) against their prefixes, with the query tiles or one
// token at a time (the generic loop, same arithmetic); the counter is the fp32 FLOPs of the
// products (2 x 2 x head_dim per query head and position), against the FMA peak of
// kernels_cpu_peak_bench.
//
//   build/bin/kernels_cpu_paged_attention_bench [--benchmark_filter=ctx:1024]
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/half.h"
#include "kernels/cpu/paged_attention.h"

namespace pagellm::kernels {
namespace {

// A batch over the token vectors (one query row of nh heads of hd per token), random queries
// in q and room for the outputs in out.
AttentionBatch MakeBatch(const std::vector<int32_t>& token_seq,
                         const std::vector<int32_t>& token_pos, const std::vector<int32_t>& tables,
                         int64_t max_blocks_per_seq, int64_t nh, int64_t hd, std::mt19937* rng,
                         std::vector<float>* q, std::vector<float>* out) {
  std::normal_distribution<float> dist;
  const auto n = static_cast<int64_t>(token_seq.size());
  q->resize(n * nh * hd);
  out->resize(q->size());
  for (float& x : *q) x = dist(*rng);
  AttentionBatch b;
  b.num_tokens = n;
  b.num_heads = nh;
  b.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  b.q = q->data();
  b.q_stride = nh * hd;
  b.out = out->data();
  b.out_stride = nh * hd;
  b.token_seq = token_seq.data();
  b.token_pos = token_pos.data();
  b.block_tables = tables.data();
  b.max_blocks_per_seq = max_blocks_per_seq;
  return b;
}

// args: sequences, context length, query heads, KV heads, head_dim, threads, cold. cold = 0 keeps
// one layer's cache, which then stays in the last-level cache: the kernel's own cost without
// DRAM's.
void BM_DecodeAttention(benchmark::State& state) {
  const int64_t seqs = state.range(0), ctx = state.range(1), nh = state.range(2),
                nkv = state.range(3), hd = state.range(4);
  const int threads = static_cast<int>(state.range(5));
  const bool cold = state.range(6) != 0;
  constexpr int64_t kBlockSize = 16;
  const int64_t blocks_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  const int64_t pool_blocks = seqs * blocks_per_seq;
  const int64_t elems = pool_blocks * nkv * kBlockSize * hd;
  // Several layers' caches, visited in turn, so that what one call reads is out of the caches by
  // its next turn, as in a forward pass (every other layer's K/V is read in between).
  const int64_t layers = cold ? std::max<int64_t>(2, (256 << 20) / (4 * elems)) : 1;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<uint16_t> k(layers * elems), v(layers * elems);
  for (auto* cache : {&k, &v}) {
    for (auto& h : *cache) h = FloatToHalf(dist(rng));
  }
  std::vector<int32_t> tables(pool_blocks);
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);
  std::vector<int32_t> token_seq(seqs), token_pos(seqs, static_cast<int32_t>(ctx - 1));
  std::iota(token_seq.begin(), token_seq.end(), 0);
  std::vector<float> q, out;
  const AttentionBatch b =
      MakeBatch(token_seq, token_pos, tables, blocks_per_seq, nh, hd, &rng, &q, &out);
  ThreadPool pool(threads);
  AttentionWorkspace ws;
  int64_t l = 0;
  for (auto _ : state) {
    const PagedKvLayer layer{
        k.data() + l * elems, v.data() + l * elems, KvDtype::kF16, kBlockSize, nkv, hd};
    l = (l + 1) % layers;
    PagedAttention(layer, b, &ws, &pool);
    benchmark::ClobberMemory();
  }
  const double bytes = 2.0 * seqs * ctx * nkv * hd * sizeof(uint16_t);
  state.counters["kv_bytes_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * bytes, benchmark::Counter::kIsRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int64_t ctx : {256, 1024}) {
    for (int threads : {1, all}) {
      b->Args({64, ctx, 9, 3, 64, threads, 1});    // SmolLM2-135M, 64 sequences
      b->Args({16, ctx, 32, 8, 128, threads, 1});  // Llama-3-8B-like, 16 sequences
    }
  }
  b->Args({64, 256, 9, 3, 64, 1, 0});  // 12.6 MB: one layer's cache, cached
}

// args: prompt length, queries, query heads, KV heads, head_dim, threads, tiles.
void BM_PrefillAttention(benchmark::State& state) {
  const int64_t ctx = state.range(0), chunk = state.range(1), nh = state.range(2),
                nkv = state.range(3), hd = state.range(4);
  const int threads = static_cast<int>(state.range(5));
  const bool tiles = state.range(6) != 0;
  constexpr int64_t kBlockSize = 16;
  const int64_t blocks = (ctx + kBlockSize - 1) / kBlockSize;
  const int64_t elems = blocks * nkv * kBlockSize * hd;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<uint16_t> k(elems), v(elems);
  for (auto* cache : {&k, &v}) {
    for (auto& h : *cache) h = FloatToHalf(dist(rng));
  }
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<int32_t> token_seq(chunk, 0), token_pos(chunk);
  std::iota(token_pos.begin(), token_pos.end(), static_cast<int32_t>(ctx - chunk));
  std::vector<float> q, out;
  const AttentionBatch b = MakeBatch(token_seq, token_pos, table, blocks, nh, hd, &rng, &q, &out);
  ThreadPool pool(threads);
  AttentionWorkspace ws;
  const PagedKvLayer layer{k.data(), v.data(), KvDtype::kF16, kBlockSize, nkv, hd};
  for (auto _ : state) {
    internal::PagedAttentionTasks(layer, b, &ws, &pool, tiles);
    benchmark::ClobberMemory();
  }
  double pairs = 0;  // (query, position) pairs
  for (int32_t p : token_pos) pairs += p + 1.0;
  state.counters["flops_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 4.0 * hd * nh * pairs, benchmark::Counter::kIsRate);
}

void PrefillShapes(benchmark::internal::Benchmark* b) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int tiles : {0, 1}) {
    for (int threads : {1, all}) {
      b->Args({512, 512, 9, 3, 64, threads, tiles});     // SmolLM2-135M, a 512-token prompt
      b->Args({4096, 512, 9, 3, 64, threads, tiles});    // the last 512 of a 4096-token prompt
      b->Args({2048, 256, 32, 8, 128, threads, tiles});  // Llama-3-8B-like
    }
  }
}

BENCHMARK(BM_PrefillAttention)
    ->Apply(PrefillShapes)
    ->ArgNames({"ctx", "queries", "heads", "kv_heads", "head_dim", "threads", "tiles"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_DecodeAttention)
    ->Apply(Shapes)
    ->ArgNames({"seqs", "ctx", "heads", "kv_heads", "head_dim", "threads", "cold"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagellm::kernels

BENCHMARK_MAIN();
