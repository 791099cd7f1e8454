// QuantMatmul against the int8 ceiling (kernels_cpu_peak_bench): SmolLM2-135M's layer shapes and
// a 7B-class one, at M = 1 (decode), 64 (batched decode) and 512 (prefill) activation rows, for
// Q4_0, Q4_1, Q8_0, Q5_0, Q4_K and Q6_K weights (what Q4_K_M files hold), on one thread and on all
// cores. The counter is int8 operations per second (2 per multiply-add, the weights' n x k x M),
// comparable with the peak's ops_per_s; activation quantization is outside the timed region.
//
//   build/bin/kernels_cpu_quant_matmul_bench [--benchmark_filter=Q4_1]
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/half.h"
#include "kernels/cpu/quant_matmul.h"

namespace pagellm::kernels {
namespace {

std::vector<uint8_t> RandomBlocks(GgmlType type, int64_t n, int64_t k) {
  const GgmlTypeTraits traits = GetGgmlTypeTraits(static_cast<uint32_t>(type));
  std::mt19937 rng(7);
  const int64_t blocks = n * k / traits.block_elems;
  std::vector<uint8_t> w(blocks * traits.block_bytes);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const uint16_t d = FloatToHalf(0.01f);
  for (int64_t blk = 0; blk < blocks; ++blk) {  // finite scales where the format keeps them
    uint8_t* p = w.data() + blk * traits.block_bytes;
    if (type == GgmlType::kQ6_K) {
      std::memcpy(p + 208, &d, 2);
      continue;
    }
    std::memcpy(p, &d, 2);
    if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 || type == GgmlType::kQ4_K ||
        type == GgmlType::kQ5_K) {
      std::memcpy(p + 2, &d, 2);
    }
  }
  return w;
}

// args: type, M, N, K, threads, cold. With cold = 1 the product cycles through enough copies of
// the matrix (64 MiB in all) that its weights come from DRAM, as in a forward pass, whose layers'
// weights together exceed the last-level cache; with 0 a small matrix stays cached between calls.
void BM_QuantMatmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t m = state.range(1), n = state.range(2), k = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const bool cold = state.range(5) != 0;
  const std::vector<uint8_t> blocks = RandomBlocks(type, n, k);
  std::vector<PackedQuantMatrix> copies;
  do {
    auto packed = PackQuantMatrix(type, blocks.data(), n, k);
    if (!packed.ok()) {
      state.SkipWithError(std::string(packed.status().message()).c_str());
      return;
    }
    copies.push_back(*std::move(packed));
  } while (cold && copies.size() * copies[0].data.size() < (64u << 20));
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(m * k), y(m * n);
  for (float& v : x) v = dist(rng);
  ThreadPool pool(threads);
  QuantizedActivations qx;
  QuantizeActivations(x.data(), m, k, k, &qx, &pool);
  size_t next = 0;
  for (auto _ : state) {
    QuantMatmul(copies[next], qx, y.data(), n, &pool);
    next = (next + 1) % copies.size();
    benchmark::ClobberMemory();
  }
  state.counters["ops_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * m * n * k, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(GetGgmlTypeTraits(static_cast<uint32_t>(type)).name));
}

void Shapes(benchmark::internal::Benchmark* b) {
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  struct Shape {
    int64_t n, k;
  };
  // SmolLM2-135M: QKV (576 -> 960), gate/up (576 -> 3072), down (1536 -> 576), the tied output
  // projection (576 -> 49152, Q8_0 in the default model); a 7B gate/up.
  const Shape shapes[] = {{960, 576}, {3072, 576}, {576, 1536}, {49152, 576}, {22016, 4096}};
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ5_0,
                     GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (const Shape& s : shapes) {
      if (s.k % GetGgmlTypeTraits(t).block_elems != 0) continue;  // K-quants: 256-element rows
      for (int64_t m : {1, 64, 512}) {
        if (s.n > 10000 && m > 64) continue;  // minutes per point
        for (int threads : {1, all}) {
          for (int cold : {0, 1}) b->Args({static_cast<int64_t>(t), m, s.n, s.k, threads, cold});
        }
      }
    }
  }
}

BENCHMARK(BM_QuantMatmul)
    ->Apply(Shapes)
    ->ArgNames({"type", "M", "N", "K", "threads", "cold"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagellm::kernels

BENCHMARK_MAIN();
