// Attention with an online softmax over 16-position chunks (attention_tile.h states the
// arithmetic). Tokens of one sequence at consecutive positions form query tiles that run the
// tile kernel (AVX-512 or AVX2, head_dim 64 or 128): each chunk of K and V is read once for the
// tile's queries and their GQA heads. Other shapes, and the tests' reference, run the generic
// loop: one (token, KV head) at a time, the same operations with dot products and axpys that are
// vector (AVX-512, AVX2) or portable, all bit-identical.
#include "kernels/cpu/paged_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp8.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/fp8_x86.h"
#include "kernels/cpu/ops.h"

namespace pagellm::kernels {
namespace {

// --- portable ---
// Both paths accumulate dot products in 16 lanes (lane i % 16) with fma and reduce the lanes
// with ReduceLanes16; axpy is one fma per element. So they are bit-identical.
// An fp8 cache's element i (exact).
float Fp8At(const void* p, KvDtype t, int64_t i) {
  const uint8_t b = static_cast<const uint8_t*>(p)[i];
  return t == KvDtype::kFp8E4M3 ? Fp8E4M3ToFloat(b) : Fp8E5M2ToFloat(b);
}

float DotPortable(const float* q, const void* k, KvDtype t, int64_t n) {
  float lanes[16] = {};
  if (t == KvDtype::kF32) {
    const float* kf = static_cast<const float*>(k);
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] = std::fma(q[i], kf[i], lanes[i % 16]);
  } else if (IsFp8(t)) {
    for (int64_t i = 0; i < n; ++i) lanes[i % 16] = std::fma(q[i], Fp8At(k, t, i), lanes[i % 16]);
  } else {
    const uint16_t* kh = static_cast<const uint16_t*>(k);
    for (int64_t i = 0; i < n; ++i)
      lanes[i % 16] = std::fma(q[i], HalfToFloat(kh[i]), lanes[i % 16]);
  }
  return ReduceLanes16(lanes);
}

void AxpyPortable(float a, const void* v, KvDtype t, int64_t n, float* out) {
  if (t == KvDtype::kF32) {
    const float* vf = static_cast<const float*>(v);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a, vf[i], out[i]);
  } else if (IsFp8(t)) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a, Fp8At(v, t, i), out[i]);
  } else {
    const uint16_t* vh = static_cast<const uint16_t*>(v);
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(a, HalfToFloat(vh[i]), out[i]);
  }
}

// --- AVX-512 (head_dim % 16 == 0) ---
// GCC 12's _mm512_cvtph_ps starts from _mm512_undefined_ps, which it then reports as
// maybe-uninitialized wherever the conversion is inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512vl,fma,f16c"))) inline __m512 Load16(const void* p, KvDtype t,
                                                                          int64_t i) {
  if (t == KvDtype::kF32) return _mm512_loadu_ps(static_cast<const float*>(p) + i);
  if (IsFp8(t)) {
    return internal::Fp8Load16(static_cast<const uint8_t*>(p) + i, t == KvDtype::kFp8E4M3);
  }
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
}

__attribute__((target("avx512f,avx512vl,fma,f16c"))) float DotAvx512(const float* q, const void* k,
                                                                     KvDtype t, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), Load16(k, t, i), acc);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  return ReduceLanes16(lanes);
}

__attribute__((target("avx512f,avx512vl,fma,f16c"))) void AxpyAvx512(float a, const void* v,
                                                                     KvDtype t, int64_t n,
                                                                     float* out) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_fmadd_ps(av, Load16(v, t, i), _mm512_loadu_ps(out + i)));
  }
}

#pragma GCC diagnostic pop

// --- AVX2 (head_dim % 16 == 0): the 16 lanes in two 256-bit vectors ---
__attribute__((target("avx2,fma,f16c"))) inline __m256 Load8(const void* p, KvDtype t, int64_t i) {
  if (t == KvDtype::kF32) return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  if (IsFp8(t)) {
    return internal::Fp8Load8(static_cast<const uint8_t*>(p) + i, t == KvDtype::kFp8E4M3);
  }
  return _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
}

__attribute__((target("avx2,fma,f16c"))) float DotAvx2(const float* q, const void* k, KvDtype t,
                                                       int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(k, t, i), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), Load8(k, t, i + 8), hi);
  }
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, lo);
  _mm256_store_ps(lanes + 8, hi);
  return ReduceLanes16(lanes);
}

__attribute__((target("avx2,fma,f16c"))) void AxpyAvx2(float a, const void* v, KvDtype t, int64_t n,
                                                       float* out) {
  const __m256 av = _mm256_set1_ps(a);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(av, Load8(v, t, i), _mm256_loadu_ps(out + i)));
  }
}

// The byte offsets of positions 0..ctx-1's rows of KV head kvh, block by block: one table
// lookup per block rather than a division per position.
void RowOffsets(const PagedKvLayer& layer, const int32_t* table, int64_t ctx, int64_t kvh,
                int64_t* rows) {
  const int64_t bs = layer.block_size, row_bytes = layer.head_dim * KvDtypeBytes(layer.dtype);
  for (int64_t b = 0, p = 0; p < ctx; ++b) {
    const int64_t base = (static_cast<int64_t>(table[b]) * layer.num_kv_heads + kvh) * bs;
    for (int64_t j = 0; j < bs && p < ctx; ++j, ++p) rows[p] = (base + j) * row_bytes;
  }
}

// hd floats to fp16, rounding to nearest even: F16C's conversion rounds as FloatToHalf and, like
// it, keeps a NaN quiet with the top payload bits, so both give the same bits.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx2,f16c"))) void FloatsToHalvesAvx2(const float* x, int64_t n,
                                                             uint16_t* h) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) h[i] = FloatToHalf(x[i]);
}

__attribute__((target("avx512f,f16c"))) void FloatsToHalvesAvx512(const float* x, int64_t n,
                                                                  uint16_t* h) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) h[i] = FloatToHalf(x[i]);
}
#pragma GCC diagnostic pop

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512vl,fma,f16c"))) void Fp8ToFloatsAvx512(const uint8_t* x,
                                                                            int64_t n, KvDtype t,
                                                                            float* out) {
  for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(out + i, Load16(x, t, i));
}
__attribute__((target("avx2,fma,f16c"))) void Fp8ToFloatsAvx2(const uint8_t* x, int64_t n,
                                                              KvDtype t, float* out) {
  for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(out + i, Load8(x, t, i));
}
#pragma GCC diagnostic pop

// Floats to fp8 codes as FloatToFp8E4M3 / FloatToFp8E5M2 do it (common/fp8.cc), 8 lanes at a
// time (AVX2 also on AVX-512 machines: WriteKv converts a few values per token): a normal result
// rounds the float's bits to the format's mantissa (nearest even) and rebiases the exponent,
// saturating; a subnormal one is the float addition of a magic number whose last place is the
// format's smallest step; NaN gives 0x7f under the sign.
struct Fp8Format {
  int mbits, bias, max_code;
};
constexpr Fp8Format FormatOf(KvDtype t) {
  return t == KvDtype::kFp8E4M3 ? Fp8Format{3, 7, 0x7e} : Fp8Format{2, 15, 0x7b};
}

__attribute__((target("avx2"))) void FloatsToFp8Avx2(const float* x, int64_t n, KvDtype t,
                                                     uint8_t* out) {
  const Fp8Format f = FormatOf(t);
  const int drop = 23 - f.mbits;
  const float magic = std::ldexp(static_cast<float>(1 << drop), 1 - f.bias);
  const __m256i min_normal = _mm256_set1_epi32((1 - f.bias + 127) << 23);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i half_ulp = _mm256_set1_epi32((1 << (drop - 1)) - 1), one = _mm256_set1_epi32(1);
  const __m256i rebias = _mm256_set1_epi32((127 - f.bias) << f.mbits);
  const __m256i mant_mask = _mm256_set1_epi32((1 << f.mbits) - 1);
  const __m256i max_code = _mm256_set1_epi32(f.max_code);
  const __m256 magic_v = _mm256_set1_ps(magic);
  const __m256i magic_bits = _mm256_castps_si256(magic_v);
  const __m128i drop_shift = _mm_cvtsi32_si128(drop);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i a = _mm256_and_si256(u, abs_mask);
    const __m256i r = _mm256_add_epi32(_mm256_add_epi32(a, half_ulp),
                                       _mm256_and_si256(_mm256_srl_epi32(a, drop_shift), one));
    __m256i normal = _mm256_sub_epi32(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(r, 23), f.mbits),
                        _mm256_and_si256(_mm256_srl_epi32(r, drop_shift), mant_mask)),
        rebias);
    normal = _mm256_min_epi32(normal, max_code);
    const __m256i sub = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic_v)), magic_bits);
    // a and min_normal are non-negative: a signed compare orders them.
    __m256i code = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(min_normal, a));
    code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), _mm256_cmpgt_epi32(a, inf));
    code = _mm256_or_si256(code, _mm256_srli_epi32(_mm256_andnot_si256(abs_mask, u), 24));
    const __m256i p8 = _mm256_packus_epi16(_mm256_packus_epi32(code, code), code);
    const __m128i lo = _mm256_castsi256_si128(p8), hi = _mm256_extracti128_si256(p8, 1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi32(lo, hi));
  }
  const auto scalar = t == KvDtype::kFp8E4M3 ? FloatToFp8E4M3 : FloatToFp8E5M2;
  for (; i < n; ++i) out[i] = scalar(x[i]);
}

}  // namespace

namespace internal {
void FloatsToFp8(const float* x, int64_t n, KvDtype t, uint8_t* out, bool vector) {
  if (vector && GetCpuFeatures().avx2) return FloatsToFp8Avx2(x, n, t, out);
  const auto scalar = t == KvDtype::kFp8E4M3 ? FloatToFp8E4M3 : FloatToFp8E5M2;
  for (int64_t i = 0; i < n; ++i) out[i] = scalar(x[i]);
}

void Fp8ToFloats(const uint8_t* x, int64_t n, KvDtype t, float* out, bool vector) {
  if (vector && GetCpuFeatures().avx512) return Fp8ToFloatsAvx512(x, n, t, out);
  if (vector && GetCpuFeatures().avx2) return Fp8ToFloatsAvx2(x, n, t, out);
  for (int64_t i = 0; i < n; ++i) out[i] = Fp8At(x, t, i);
}

void FloatsToHalves(const float* x, int64_t n, uint16_t* h, bool vector) {
  if (vector && GetCpuFeatures().avx512) return FloatsToHalvesAvx512(x, n, h);
  if (vector && GetCpuFeatures().avx2) return FloatsToHalvesAvx2(x, n, h);
  for (int64_t i = 0; i < n; ++i) h[i] = FloatToHalf(x[i]);
}
}  // namespace internal

void WriteKv(const PagedKvLayer& layer, const float* k, const float* v, int64_t stride,
             int64_t num_tokens, const int64_t* slots) {
  const int64_t hd = layer.head_dim, bs = layer.block_size, nkv = layer.num_kv_heads;
  const int64_t eb = KvDtypeBytes(layer.dtype);
  const bool vector = GetCpuFeatures().avx2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t block = slots[t] / bs, off = slots[t] % bs;
    for (int64_t h = 0; h < nkv; ++h) {
      const int64_t dst = ((block * nkv + h) * bs + off) * hd;
      const float* ks = k + t * stride + h * hd;
      const float* vs = v + t * stride + h * hd;
      if (layer.dtype == KvDtype::kF32) {
        std::memcpy(static_cast<float*>(layer.k) + dst, ks, hd * eb);
        std::memcpy(static_cast<float*>(layer.v) + dst, vs, hd * eb);
      } else if (IsFp8(layer.dtype)) {
        internal::FloatsToFp8(ks, hd, layer.dtype, static_cast<uint8_t*>(layer.k) + dst, vector);
        internal::FloatsToFp8(vs, hd, layer.dtype, static_cast<uint8_t*>(layer.v) + dst, vector);
      } else {
        internal::FloatsToHalves(ks, hd, static_cast<uint16_t*>(layer.k) + dst, vector);
        internal::FloatsToHalves(vs, hd, static_cast<uint16_t*>(layer.v) + dst, vector);
      }
    }
  }
}

namespace {
// The attention of every (token, KV head) task: the AVX-512 tasks specialized for the shape
// where allowed and the CPU has them, else the generic loop (vector unless `portable`).
void RunAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                  AttentionWorkspace* workspace, ThreadPool* pool, bool specialized, bool portable);
}  // namespace

void PagedAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                    AttentionWorkspace* workspace, ThreadPool* pool) {
  internal::PagedAttentionTasks(layer, batch, workspace, pool, /*specialized=*/true);
}

void internal::PagedAttentionTasks(const PagedKvLayer& layer, const AttentionBatch& batch,
                                   AttentionWorkspace* workspace, ThreadPool* pool,
                                   bool specialized) {
  RunAttention(layer, batch, workspace, pool, specialized, /*portable=*/false);
}

void internal::PagedAttentionGeneric(const PagedKvLayer& layer, const AttentionBatch& batch,
                                     AttentionWorkspace* workspace, ThreadPool* pool,
                                     bool portable) {
  RunAttention(layer, batch, workspace, pool, /*specialized=*/false, portable);
}

namespace {

using DotFn = float (*)(const float*, const void*, KvDtype, int64_t);
using AxpyFn = void (*)(float, const void*, KvDtype, int64_t, float*);

// One (token, KV head) the generic way: for each query head, attention_tile.h's chunk steps
// with dot() and axpy().
void GenericTask(const PagedKvLayer& layer, const int64_t* rows, int64_t ctx, const float* q0,
                 float* o0, int64_t group, float scale, DotFn dot, AxpyFn axpy) {
  constexpr int64_t kChunk = internal::kAttentionChunk;
  const int64_t hd = layer.head_dim;
  const char* kbase = static_cast<const char*>(layer.k);
  const char* vbase = static_cast<const char*>(layer.v);
  for (int64_t g = 0; g < group; ++g) {
    const float* q = q0 + g * hd;
    float* o = o0 + g * hd;
    std::memset(o, 0, hd * sizeof(float));
    float m = -INFINITY, l = 0.0f;
    for (int64_t c0 = 0; c0 < ctx; c0 += kChunk) {
      const int64_t n = std::min(kChunk, ctx - c0);
      float s[kChunk], p[kChunk];
      float m_new = m;
      for (int64_t j = 0; j < kChunk; ++j) {
        s[j] = j < n ? dot(q, kbase + rows[c0 + j], layer.dtype, hd) * scale : -INFINITY;
        m_new = std::max(m_new, s[j]);
      }
      const float corr = m == -INFINITY ? 0.0f : ExpApprox(m - m_new);
      for (int64_t j = 0; j < kChunk; ++j) p[j] = j < n ? ExpApprox(s[j] - m_new) : 0.0f;
      l = l * corr + ReduceLanes16(p);
      m = m_new;
      for (int64_t i = 0; i < hd; ++i) o[i] *= corr;
      for (int64_t j = 0; j < n; ++j) axpy(p[j], vbase + rows[c0 + j], layer.dtype, hd, o);
    }
    const float inv = 1.0f / l;
    for (int64_t i = 0; i < hd; ++i) o[i] *= inv;
  }
}

// Grows v to at least n elements (never shrinks: a steady state allocates nothing).
template <typename T>
void Reserve(std::vector<T>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) < n) v->resize(n);
}

void RunAttention(const PagedKvLayer& layer, const AttentionBatch& batch,
                  AttentionWorkspace* workspace, ThreadPool* pool, bool specialized,
                  bool portable) {
  const int64_t hd = layer.head_dim, nkv = layer.num_kv_heads;
  const int64_t group = batch.num_heads / nkv;
  const CpuFeatures& cpu = GetCpuFeatures();
  const bool fast = !portable && cpu.avx512 && hd % 16 == 0;
  const bool avx2 = !portable && cpu.avx2 && hd % 16 == 0;
  const DotFn dot = fast ? DotAvx512 : avx2 ? DotAvx2 : DotPortable;
  const AxpyFn axpy = fast ? AxpyAvx512 : avx2 ? AxpyAvx2 : AxpyPortable;
  internal::AttentionTileFn tile_fn = nullptr;
  if (specialized && fast) tile_fn = internal::AttentionTileAvx512(hd);
  if (specialized && avx2 && tile_fn == nullptr) tile_fn = internal::AttentionTileAvx2(hd);
  const int threads = pool != nullptr ? pool->num_threads() : 1;

  // Tiles: runs of tokens of one sequence at consecutive positions, of up to kTileRows rows
  // (queries x group; their outputs stay in L1), fewer where that leaves threads idle.
  constexpr int64_t kTileRows = 48 * 64;  // rows x head_dim
  int64_t max_queries = 1;
  if (tile_fn != nullptr) {
    max_queries = std::max<int64_t>(1, kTileRows / hd / group);
    const int64_t spread = (batch.num_tokens * nkv + 4 * threads - 1) / (4 * threads);
    max_queries = std::max<int64_t>(1, std::min(max_queries, spread));
  }
  auto& tiles = workspace->tiles;  // (first token, count) pairs
  Reserve(&tiles, 2 * batch.num_tokens);
  int64_t num_tiles = 0;
  for (int64_t t = 0; t < batch.num_tokens;) {
    int64_t n = 1;
    while (t + n < batch.num_tokens && n < max_queries &&
           batch.token_seq[t + n] == batch.token_seq[t] &&
           batch.token_pos[t + n] == batch.token_pos[t + n - 1] + 1) {
      ++n;
    }
    tiles[2 * num_tiles] = t;
    tiles[2 * num_tiles + 1] = n;
    ++num_tiles;
    t += n;
  }

  if (static_cast<int>(workspace->per_thread.size()) < threads)
    workspace->per_thread.resize(threads);
  int64_t max_ctx = 0;
  for (int64_t t = 0; t < batch.num_tokens; ++t)
    max_ctx = std::max<int64_t>(max_ctx, batch.token_pos[t] + 1);
  for (auto& s : workspace->per_thread) {
    Reserve(&s.rows, max_ctx);
    Reserve(&s.next_rows, max_ctx);
    if (tile_fn != nullptr)
      Reserve(&s.tile, internal::AttentionTileScratch(max_queries * group, hd));
  }

  // Task k is (tile, KV head); the tiles go in the order first, last, second, second to last...
  // so that each thread's contiguous range mixes short and long contexts (a prompt's causal
  // tiles grow along it). Where tiles hold several queries on average (prompts), consecutive
  // tasks take the same KV head, so that a thread's next tile finds that head's K and V rows in
  // L2 (a 4,096-token prompt's three KV heads of 64 need 3 MB in fp16, one of them 1 MB);
  // otherwise (decode) they take the heads of one sequence in turn, whose rows lie side by side
  // in each block.
  const bool head_major = 2 * num_tiles <= batch.num_tokens;
  struct Task {
    int64_t t0, count, ctx, kvh;
    const int32_t* table;
  };
  const auto describe = [&](int64_t task) {
    const int64_t k = head_major ? task % num_tiles : task / nkv;
    const int64_t kvh = head_major ? task / num_tiles : task % nkv;
    const int64_t tile = k % 2 == 0 ? k / 2 : num_tiles - 1 - k / 2;
    const int64_t t0 = tiles[2 * tile], count = tiles[2 * tile + 1];
    return Task{t0, count, batch.token_pos[t0 + count - 1] + 1, kvh,
                batch.block_tables + batch.token_seq[t0] * batch.max_blocks_per_seq};
  };
  // A decode task is short (a few chunks), so the K and V rows of its first chunks are
  // requested while the thread's previous task runs, not at its own start.
  const int64_t row_bytes = hd * KvDtypeBytes(layer.dtype);
  const auto prefetch_start = [&](const int64_t* rows, int64_t ctx) {
    const char* kbase = static_cast<const char*>(layer.k);
    const char* vbase = static_cast<const char*>(layer.v);
    for (int64_t p = 0; p < std::min<int64_t>(ctx, 2 * internal::kAttentionChunk); ++p) {
      for (int64_t i = 0; i < row_bytes; i += 64) {
        _mm_prefetch(kbase + rows[p] + i, _MM_HINT_T0);
        _mm_prefetch(vbase + rows[p] + i, _MM_HINT_T0);
      }
    }
  };
  auto work = [&](int64_t begin, int64_t end, int thread) {
    if (begin >= end) return;
    auto& scratch = workspace->per_thread[thread];
    int64_t* rows = scratch.rows.data();
    int64_t* next_rows = scratch.next_rows.data();
    Task cur = describe(begin);
    RowOffsets(layer, cur.table, cur.ctx, cur.kvh, rows);
    for (int64_t task = begin; task < end; ++task) {
      if (task + 1 < end) {
        const Task next = describe(task + 1);
        RowOffsets(layer, next.table, next.ctx, next.kvh, next_rows);
        prefetch_start(next_rows, next.ctx);
      }
      const int64_t t0 = cur.t0, count = cur.count, kvh = cur.kvh;
      const float* q0 = batch.q + t0 * batch.q_stride + kvh * group * hd;
      float* o0 = batch.out + t0 * batch.out_stride + kvh * group * hd;
      if (tile_fn != nullptr) {
        float* buf = scratch.tile.data();
        buf += (64 - reinterpret_cast<uintptr_t>(buf) % 64) % 64 / sizeof(float);
        internal::AttentionTileArgs args;
        args.layer = &layer;
        args.kv_rows = rows;
        args.num_queries = count;
        args.group = group;
        args.q = q0;
        args.q_stride = batch.q_stride;
        args.out = o0;
        args.out_stride = batch.out_stride;
        args.pos = batch.token_pos + t0;
        args.scale = batch.scale;
        args.scratch = buf;
        tile_fn(args);
      } else {
        for (int64_t i = 0; i < count; ++i) {
          GenericTask(layer, rows, batch.token_pos[t0 + i] + 1, q0 + i * batch.q_stride,
                      o0 + i * batch.out_stride, group, batch.scale, dot, axpy);
        }
      }
      std::swap(rows, next_rows);
      if (task + 1 < end) cur = describe(task + 1);
    }
  };
  const int64_t tasks = num_tiles * nkv;
  if (pool != nullptr) {
    pool->ParallelFor(tasks, work);
  } else {
    work(0, tasks, 0);
  }
}

}  // namespace
}  // namespace pagellm::kernels
