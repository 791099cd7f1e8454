// The ceilings the CPU kernels are judged against (kernels/cpu/README.md): the int8 dot-product
// rate (AVX-512 VNNI vpdpbusd; AMX tdpbssd where the OS permits AMX; AVX2 vpmaddubsw without
// AVX-512), the bf16 one (AVX512_BF16 vdpbf16ps; AMX tdpbf16ps), fp32 FMA, and memory
// bandwidth, per core and on all cores.
//
//   build/bin/kernels_cpu_peak_bench [--benchmark_filter=Int8]
//
// Compute: 12 independent accumulator chains of one instruction on register operands (no
// memory traffic), 512-bit and 256-bit forms; counters are operations per second (a multiply
// and an add count 2, as GEMM FLOPs are counted: vpdpbusd zmm = 64 int8 MACs = 128 ops).
// Memory: a read pass (sum of 64-byte vectors) and a copy pass over 1 GiB, far beyond the
// caches; bytes per second counts bytes read plus bytes written. Threads(N) runs N copies at
// once, each on its own buffer; counters are the sum over threads.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_features.h"

namespace pagellm::kernels {
namespace {

constexpr int kChains = 12;
constexpr int64_t kInnerIters = 1 << 16;

bool Has(const std::string& feature) {
  __builtin_cpu_init();
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
  if (feature == "avx512vnni") {
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  }
  if (feature == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
  if (feature == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return false;
}

// Twelve independent accumulators c0..c11 += one instruction of (a, b) each, in inline assembly
// so that the compiler keeps them in registers and cannot fold the loop away. `insn` is the AT&T
// mnemonic (sources b, a; destination c); `reg` the register prefix ("zmm" or "ymm").
#define PAGELLM_CHAIN(insn, V)                                                          \
  asm volatile(insn " %[b], %[a], %[c0]\n\t" insn " %[b], %[a], %[c1]\n\t" insn         \
                    " %[b], %[a], %[c2]\n\t" insn " %[b], %[a], %[c3]\n\t" insn         \
                    " %[b], %[a], %[c4]\n\t" insn " %[b], %[a], %[c5]\n\t" insn         \
                    " %[b], %[a], %[c6]\n\t" insn " %[b], %[a], %[c7]\n\t" insn         \
                    " %[b], %[a], %[c8]\n\t" insn " %[b], %[a], %[c9]\n\t" insn         \
                    " %[b], %[a], %[c10]\n\t" insn " %[b], %[a], %[c11]\n\t"            \
               : [c0] "+v"(V##0), [c1] "+v"(V##1), [c2] "+v"(V##2), [c3] "+v"(V##3),    \
                 [c4] "+v"(V##4), [c5] "+v"(V##5), [c6] "+v"(V##6), [c7] "+v"(V##7),    \
                 [c8] "+v"(V##8), [c9] "+v"(V##9), [c10] "+v"(V##10), [c11] "+v"(V##11) \
               : [a] "v"(a), [b] "v"(b))

// Twelve named accumulators (an array would be stored back to the stack every iteration).
#define PAGELLM_ACCUMULATORS(type, init)                                               \
  type acc0 = init(0), acc1 = init(1), acc2 = init(2), acc3 = init(3), acc4 = init(4), \
       acc5 = init(5), acc6 = init(6), acc7 = init(7), acc8 = init(8), acc9 = init(9), \
       acc10 = init(10), acc11 = init(11)
#define PAGELLM_SUM() \
  Sum({&acc0, &acc1, &acc2, &acc3, &acc4, &acc5, &acc6, &acc7, &acc8, &acc9, &acc10, &acc11})

// The first 32-bit lane of each accumulator, summed: keeps every chain live.
int64_t Sum(std::initializer_list<const void*> accs) {
  int64_t s = 0;
  for (const void* a : accs) {
    int32_t lane;
    std::memcpy(&lane, a, 4);
    s += lane;
  }
  return s;
}

__attribute__((target("avx512f,avx512vnni"))) int64_t Int8Zmm(int64_t iters) {
  PAGELLM_ACCUMULATORS(__m512i, _mm512_set1_epi32);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
  for (int64_t i = 0; i < iters; ++i) PAGELLM_CHAIN("vpdpbusd", acc);
  return PAGELLM_SUM();
}

__attribute__((target("avx512f,avx512vl,avx512vnni"))) int64_t Int8Ymm(int64_t iters) {
  PAGELLM_ACCUMULATORS(__m256i, _mm256_set1_epi32);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  for (int64_t i = 0; i < iters; ++i) PAGELLM_CHAIN("vpdpbusd", acc);
  return PAGELLM_SUM();
}

__attribute__((target("avx512f,avx512bf16"))) int64_t Bf16Zmm(int64_t iters) {
  PAGELLM_ACCUMULATORS(__m512, _mm512_set1_ps);
  const __m512i a = _mm512_set1_epi16(0x3f80), b = _mm512_set1_epi16(0x3f00);
  for (int64_t i = 0; i < iters; ++i) PAGELLM_CHAIN("vdpbf16ps", acc);
  return PAGELLM_SUM();
}

__attribute__((target("avx512f,fma"))) int64_t Fp32Zmm(int64_t iters) {
  PAGELLM_ACCUMULATORS(__m512, _mm512_set1_ps);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i) PAGELLM_CHAIN("vfmadd231ps", acc);
  return PAGELLM_SUM();
}

// AVX2's int8 product: vpmaddubsw (32 unsigned x signed byte products, pairs added into 16
// int16 lanes), the instruction the AVX2 kernel issues per 4 activation bytes; its int16 and
// int32 additions come on top, so this is an upper bound. (vpmaddubsw has no accumulator: each
// "chain" overwrites its register, twelve independent instructions per iteration.)
__attribute__((target("avx2"))) int64_t Int8MaddubsYmm(int64_t iters) {
  PAGELLM_ACCUMULATORS(__m256i, _mm256_set1_epi32);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5);
  for (int64_t i = 0; i < iters; ++i) PAGELLM_CHAIN("vpmaddubsw", acc);
  return PAGELLM_SUM();
}

__attribute__((target("avx2,fma"))) int64_t Fp32Ymm(int64_t iters) {
  PAGELLM_ACCUMULATORS(__m256, _mm256_set1_ps);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iters; ++i) PAGELLM_CHAIN("vfmadd231ps", acc);
  return PAGELLM_SUM();
}

// AMX: four 16 x 16 accumulator tiles, each += one tile product of two 16 x 64-byte operand tiles
// per iteration (tdpbssd: 16 x 16 x 64 int8 multiply-adds; tdpbf16ps: 16 x 16 x 32 bf16 ones).
struct AmxConfig {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

__attribute__((target("amx-tile"))) void AmxSetUp(const uint8_t* operands) {
  AmxConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  _tile_zero(0);  // (tile numbers must be constants)
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operands, 64);
  _tile_loadd(5, operands, 64);
  _tile_loadd(6, operands, 64);
  _tile_loadd(7, operands, 64);
}

// kBf16: tdpbf16ps, else tdpbssd.
template <bool kBf16>
__attribute__((target("amx-tile,amx-int8,amx-bf16"))) int64_t AmxProducts(int64_t iters) {
  alignas(64) uint8_t buf[1024] = {1};
  AmxSetUp(buf);
  for (int64_t i = 0; i < iters; ++i) {
    if constexpr (kBf16) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    } else {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  _tile_stored(0, buf, 64);
  _tile_release();
  return buf[0];
}

void Amx(benchmark::State& state, bool usable, int64_t (*fn)(int64_t), double ops_per_iter) {
  if (!usable) {
    state.SkipWithError("no AMX, or the OS does not permit it");
    return;
  }
  constexpr int64_t kIters = 1 << 14;
  for (auto _ : state) benchmark::DoNotOptimize(fn(kIters));
  state.counters["ops_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kIters * ops_per_iter, benchmark::Counter::kIsRate);
}

void BM_AmxInt8(benchmark::State& s) {
  Amx(s, GetCpuFeatures().amx_int8, AmxProducts<false>, 4.0 * 16 * 16 * 64 * 2);
}
void BM_AmxBf16(benchmark::State& s) {
  Amx(s, GetCpuFeatures().amx_bf16, AmxProducts<true>, 4.0 * 16 * 16 * 32 * 2);
}

// ops: per instruction (2 per multiply-add).
template <typename Fn>
void Compute(benchmark::State& state, const char* feature, Fn fn, double ops) {
  if (!Has(feature)) {
    state.SkipWithError((std::string("no ") + feature).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(fn(kInnerIters));
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kInnerIters * kChains * ops,
                         benchmark::Counter::kIsRate);
}

void BM_Int8DotZmm(benchmark::State& s) { Compute(s, "avx512vnni", Int8Zmm, 2.0 * 64); }
void BM_Int8DotYmm(benchmark::State& s) { Compute(s, "avx512vnni", Int8Ymm, 2.0 * 32); }
void BM_Bf16DotZmm(benchmark::State& s) { Compute(s, "avx512bf16", Bf16Zmm, 2.0 * 32); }
void BM_Fp32FmaZmm(benchmark::State& s) { Compute(s, "avx512f", Fp32Zmm, 2.0 * 16); }
void BM_Int8MaddubsYmm(benchmark::State& s) { Compute(s, "avx2", Int8MaddubsYmm, 2.0 * 32); }
void BM_Fp32FmaYmm(benchmark::State& s) { Compute(s, "avx2", Fp32Ymm, 2.0 * 8); }

constexpr int64_t kBufferBytes = int64_t{1} << 30;

// Sums the buffer as 32-byte vectors (AVX2: every x86 machine the kernels run fast on).
__attribute__((target("avx2"))) int64_t ReadPass(const uint8_t* p, int64_t bytes) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i < bytes; i += 128) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) int64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
  return out[0] + out[3];
}

void BM_MemoryRead(benchmark::State& state) {
  if (!Has("avx2")) {
    state.SkipWithError("no avx2");
    return;
  }
  const int64_t bytes = kBufferBytes / state.threads();
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  std::memset(p, 1, bytes);
  for (auto _ : state) benchmark::DoNotOptimize(ReadPass(p, bytes));
  state.counters["bytes_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * bytes, benchmark::Counter::kIsRate);
  std::free(p);
}

void BM_MemoryCopy(benchmark::State& state) {
  const int64_t bytes = kBufferBytes / 2 / state.threads();
  std::vector<uint8_t> a(bytes, 1), b(bytes, 0);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.counters["bytes_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2 * bytes, benchmark::Counter::kIsRate);
}

const int kAllCores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

BENCHMARK(BM_Int8DotZmm)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_Int8DotYmm)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_Bf16DotZmm)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_AmxInt8)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_AmxBf16)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_Fp32FmaZmm)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_Int8MaddubsYmm)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_Fp32FmaYmm)->Threads(1)->Threads(kAllCores)->UseRealTime();
BENCHMARK(BM_MemoryRead)->Threads(1)->Threads(kAllCores)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_MemoryCopy)->Threads(1)->Threads(kAllCores)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace pagellm::kernels

BENCHMARK_MAIN();
