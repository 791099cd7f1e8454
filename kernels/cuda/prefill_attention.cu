// The prefill attention kernel. Per block (128 threads, 4 warps): one tile of up to
// kPrefillTileRows (token, query head) rows for KV head blockIdx.y; warp w owns rows
// 16w .. 16w + 15, and each thread two of them (lane / 4 and lane / 4 + 8), as the m16n8k16
// accumulator layout has it. Per key tile of 64: K (row-major) and V (transposed, so that P V's
// B fragments are 32-bit loads) go to shared memory, rows padded by 8 elements (conflict-free
// fragment loads); S = Q K^T from Q fragments held in registers; the causal mask, the online
// softmax in base 2 (scores pre-scaled by scale * log2 e), P packed to the input type straight
// from the S accumulators into A fragments, and O += P V. Positions past the context are zero in
// shared memory and masked.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_types.cuh"
#include "kernels/cuda/prefill_attention.h"

namespace pagellm::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kKeys = 64;  // keys per tile
constexpr int kPad = 8;    // elements of padding per shared-memory row
constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ __forceinline__ void Mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two values as one 32-bit register of the input type, `lo` in the low half (the lower column).
template <typename T>
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <typename T>
__device__ __forceinline__ uint32_t Load2(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

template <typename T>
__device__ __forceinline__ void Store2(T* p, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(p) = Pack<T>(lo, hi);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) PrefillKernel(PrefillAttentionParams p, int group) {
  constexpr int kSteps = D / 16;    // k-steps of Q K^T
  constexpr int kOutTiles = D / 8;  // n-tiles of O
  constexpr int kChunks = D / 8;    // 16-byte chunks per key
  __shared__ __align__(16) T k_s[kKeys][D + kPad];
  __shared__ __align__(16) T vt_s[D][kKeys + kPad];

  const PrefillTile tile = p.tiles[blockIdx.x];
  const int64_t kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quad = lane / 4, qid = lane % 4;
  const int64_t pos0 = p.positions[tile.token_begin];
  const int64_t ctx_end = pos0 + tile.num_tokens;  // keys 0 .. ctx_end - 1
  const int32_t* table =
      p.block_tables + static_cast<int64_t>(p.token_seq[tile.token_begin]) * p.block_table_stride;
  const int valid_rows = tile.num_tokens * group;

  // This thread's two rows: (token, head) pairs; rows past the tile compute on zeros and a
  // full context, and are not written.
  bool valid[2];
  int64_t qpos[2], q_off[2], out_off[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * 16 + quad + 8 * r;
    valid[r] = row < valid_rows;
    const int64_t tok = valid[r] ? row / group : 0,
                  head = kvh * group + (valid[r] ? row % group : 0);
    qpos[r] = valid[r] ? pos0 + tok : ctx_end - 1;
    q_off[r] = (tile.token_begin + tok) * p.q_stride + head * D;
    out_off[r] = (tile.token_begin + tok) * p.out_stride + head * D;
  }
  const T* q = static_cast<const T*>(p.q);
  uint32_t qa[kSteps][4];
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const int d = ks * 16 + qid * 2;
    qa[ks][0] = valid[0] ? Load2(q + q_off[0] + d) : 0u;
    qa[ks][1] = valid[1] ? Load2(q + q_off[1] + d) : 0u;
    qa[ks][2] = valid[0] ? Load2(q + q_off[0] + d + 8) : 0u;
    qa[ks][3] = valid[1] ? Load2(q + q_off[1] + d + 8) : 0u;
  }

  float o[kOutTiles][4];
#pragma unroll
  for (int u = 0; u < kOutTiles; ++u) o[u][0] = o[u][1] = o[u][2] = o[u][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float scale = p.scale * kLog2e;
  const int64_t bs = p.kv.block_size, stride = p.kv.shape().stride();
  const T* kbase = static_cast<const T*>(p.kv.k) + kvh * bs * D;
  const T* vbase = static_cast<const T*>(p.kv.v) + kvh * bs * D;

  for (int64_t kv0 = 0; kv0 < ctx_end; kv0 += kKeys) {
    for (int idx = threadIdx.x; idx < kKeys * kChunks; idx += kThreads) {
      const int key = idx / kChunks, ch = idx % kChunks;
      const int64_t pos = kv0 + key;
      uint4 kx = make_uint4(0, 0, 0, 0), vx = make_uint4(0, 0, 0, 0);
      if (pos < ctx_end) {
        const int64_t off =
            static_cast<int64_t>(table[pos / bs]) * stride + (pos % bs) * D + ch * 8;
        kx = *reinterpret_cast<const uint4*>(kbase + off);
        vx = *reinterpret_cast<const uint4*>(vbase + off);
      }
      *reinterpret_cast<uint4*>(&k_s[key][ch * 8]) = kx;
      const T* ve = reinterpret_cast<const T*>(&vx);
#pragma unroll
      for (int i = 0; i < 8; ++i) vt_s[ch * 8 + i][key] = ve[i];
    }
    __syncthreads();

    float s[kKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        const T* kr = &k_s[j * 8 + quad][ks * 16 + qid * 2];
        Mma<T>(s[j], qa[ks], Load2(kr), Load2(kr + 8));
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const int64_t key = kv0 + j * 8 + qid * 2 + e % 2;
        s[j][e] = key <= qpos[r] ? s[j][e] * scale : -INFINITY;
        tile_max[r] = fmaxf(tile_max[r], s[j][e]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      // Finite from the first tile on: key 0 is in every row's context.
      const float m_new = fmaxf(m[r], tile_max[r]);
      const float corr = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= corr;
#pragma unroll
      for (int u = 0; u < kOutTiles; ++u) {
        o[u][2 * r] *= corr;
        o[u][2 * r + 1] *= corr;
      }
    }
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - m[e / 2]);
        l[e / 2] += s[j][e];
      }
    }
#pragma unroll
    for (int t = 0; t < kKeys / 16; ++t) {
      const uint32_t a[4] = {Pack<T>(s[2 * t][0], s[2 * t][1]), Pack<T>(s[2 * t][2], s[2 * t][3]),
                             Pack<T>(s[2 * t + 1][0], s[2 * t + 1][1]),
                             Pack<T>(s[2 * t + 1][2], s[2 * t + 1][3])};
#pragma unroll
      for (int u = 0; u < kOutTiles; ++u) {
        const T* vr = &vt_s[u * 8 + quad][t * 16 + qid * 2];
        Mma<T>(o[u], a, Load2(vr), Load2(vr + 8));
      }
    }
    __syncthreads();
  }

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (!valid[r]) continue;
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int u = 0; u < kOutTiles; ++u) {
      Store2(out + out_off[r] + u * 8 + qid * 2, o[u][2 * r] * inv, o[u][2 * r + 1] * inv);
    }
  }
}

template <typename T>
cudaError_t LaunchForType(const PrefillAttentionParams& p, int group, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_tiles), static_cast<unsigned>(p.kv.num_kv_heads));
  if (p.kv.head_dim == 64) {
    PrefillKernel<T, 64><<<grid, kThreads, 0, stream>>>(p, group);
  } else if (p.kv.head_dim == 128) {
    PrefillKernel<T, 128><<<grid, kThreads, 0, stream>>>(p, group);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

int PrefillTileTokens(int64_t num_heads, int64_t num_kv_heads) {
  if (num_kv_heads <= 0 || num_heads <= 0 || num_heads % num_kv_heads != 0) return 0;
  const int64_t group = num_heads / num_kv_heads;
  return group > kPrefillTileRows ? 0 : static_cast<int>(kPrefillTileRows / group);
}

void SplitAttentionStep(const int32_t* query_start, int64_t num_seqs, int tile_tokens,
                        std::vector<PrefillTile>* tiles, std::vector<int32_t>* other) {
  tiles->clear();
  other->clear();
  const int32_t min_tokens = std::max(2, tile_tokens / 2);
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int32_t begin = query_start[s], end = query_start[s + 1];
    if (tile_tokens > 0 && end - begin >= min_tokens) {
      for (int32_t t = begin; t < end; t += tile_tokens) {
        tiles->push_back(PrefillTile{t, std::min(tile_tokens, end - t)});
      }
    } else {
      for (int32_t t = begin; t < end; ++t) other->push_back(t);
    }
  }
}

cudaError_t LaunchPrefillAttention(const PrefillAttentionParams& p, cudaStream_t stream) {
  if (p.num_tiles == 0) return cudaSuccess;
  const int tile_tokens = PrefillTileTokens(p.num_heads, p.kv.num_kv_heads);
  if (p.num_tiles < 0 || p.num_tiles > (1ll << 31) - 1 || tile_tokens == 0 ||
      p.kv.num_kv_heads > 65535 || p.kv.block_size <= 0) {
    return cudaErrorInvalidValue;
  }
  const int group = static_cast<int>(p.num_heads / p.kv.num_kv_heads);
  PAGELLM_DISPATCH_HALF(p.kv.dtype, T, return LaunchForType<T>(p, group, stream));
  return cudaSuccess;
}

}  // namespace pagellm::kernels::cuda
