#include "kernels/cpu/ops.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_x86.h"

// GCC 12's AVX-512 intrinsics start some results from _mm512_undefined_*, which it then
// reports as maybe-uninitialized wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace pagellm::kernels {

float ExpApprox(float x) {
  x = std::fmin(std::fmax(x, kExpLo), kExpHi);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}

float ReduceLanes16(const float* l) {
  float r[8];
  for (int i = 0; i < 8; ++i) r[i] = l[i] + l[i + 8];
  return ((r[0] + r[4]) + (r[2] + r[6])) + ((r[1] + r[5]) + (r[3] + r[7]));
}

void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    // Accumulate in double: cheap at these sizes and closer to the references.
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
  }
}

void ApplyRope(float* x, int64_t rows, int64_t ld, int64_t num_heads, int64_t head_dim,
               const int32_t* positions, const float* cos_sin, bool neox) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float* cs = cos_sin + static_cast<int64_t>(positions[r]) * head_dim;
    for (int64_t h = 0; h < num_heads; ++h) {
      float* v = x + r * ld + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const int64_t a = neox ? i : 2 * i;
        const int64_t b = neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

namespace internal {

void SiluMulPortable(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + ExpApprox(-g[i])) * u[i];
  }
}

__attribute__((target("avx512f"))) void SiluMulAvx512(const float* gate_up, int64_t rows,
                                                      int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    int64_t i = 0;
    for (; i + 16 <= inter; i += 16) {
      const __m512 gv = _mm512_loadu_ps(g + i);
      const __m512 neg =  // -g exactly (a sign flip), as the scalar loop
          _mm512_castsi512_ps(
              _mm512_xor_si512(_mm512_castps_si512(gv), _mm512_set1_epi32(INT32_MIN)));
      const __m512 e = ExpApprox16(neg);
      const __m512 s = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
      _mm512_storeu_ps(o + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < inter; ++i) o[i] = g[i] / (1.0f + ExpApprox(-g[i])) * u[i];
  }
}

__attribute__((target("avx2,fma"))) void SiluMulAvx2(const float* gate_up, int64_t rows,
                                                     int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    int64_t i = 0;
    for (; i + 8 <= inter; i += 8) {
      const __m256 gv = _mm256_loadu_ps(g + i);
      const __m256 neg = _mm256_xor_ps(gv, _mm256_set1_ps(-0.0f));  // -g exactly
      const __m256 e = ExpApprox8(neg);
      const __m256 s = _mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
      _mm256_storeu_ps(o + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < inter; ++i) o[i] = g[i] / (1.0f + ExpApprox(-g[i])) * u[i];
  }
}

void SoftmaxRowsPortable(float* s, int64_t rows, int64_t n, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    float* x = s + r * ld;
    float mx = x[0];
    for (int64_t i = 1; i < n; ++i) mx = std::fmax(mx, x[i]);
    float lanes[16] = {};
    for (int64_t i = 0; i < n; ++i) {
      x[i] = ExpApprox(x[i] - mx);
      lanes[i % 16] += x[i];
    }
    const float inv = 1.0f / ReduceLanes16(lanes);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
  }
}

__attribute__((target("avx512f"))) void SoftmaxRowsAvx512(float* s, int64_t rows, int64_t n,
                                                          int64_t ld) {
  const int64_t full = n / 16 * 16;
  const auto tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    float* x = s + r * ld;
    // The tail's missing lanes read as -inf for the max and add +0 to the sum: no change.
    __m512 m = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail, x + full);
    for (int64_t i = 0; i < full; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 e = ExpApprox16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
      _mm512_storeu_ps(x + i, e);
      sum = _mm512_add_ps(sum, e);
    }
    if (tail != 0) {
      const __m512 e = ExpApprox16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), mx));
      _mm512_mask_storeu_ps(x + full, tail, e);
      sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    const __m512 inv = _mm512_set1_ps(1.0f / ReduceLanes16(lanes));
    for (int64_t i = 0; i < full; i += 16)
      _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    if (tail != 0)
      _mm512_mask_storeu_ps(x + full, tail,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + full), inv));
  }
}

// The 16 lanes of the sum in two vectors over whole runs of 16, the tail added to the same
// lanes one by one: the portable loop's additions in its order.
__attribute__((target("avx2,fma"))) void SoftmaxRowsAvx2(float* s, int64_t rows, int64_t n,
                                                         int64_t ld) {
  const int64_t full = n / 16 * 16;
  for (int64_t r = 0; r < rows; ++r) {
    float* x = s + r * ld;
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < full; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[16];
    _mm256_store_ps(lanes, m);
    float mx = x[0];
    for (int i = 0; i < 8; ++i) mx = std::fmax(mx, lanes[i]);
    for (int64_t i = full; i < n; ++i) mx = std::fmax(mx, x[i]);
    const __m256 mxv = _mm256_set1_ps(mx);
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m256 a = ExpApprox8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mxv));
      const __m256 b = ExpApprox8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mxv));
      _mm256_storeu_ps(x + i, a);
      _mm256_storeu_ps(x + i + 8, b);
      lo = _mm256_add_ps(lo, a);
      hi = _mm256_add_ps(hi, b);
    }
    _mm256_store_ps(lanes, lo);
    _mm256_store_ps(lanes + 8, hi);
    for (int64_t i = full; i < n; ++i) {
      x[i] = ExpApprox(x[i] - mx);
      lanes[i % 16] += x[i];
    }
    const float inv = 1.0f / ReduceLanes16(lanes);
    const __m256 invv = _mm256_set1_ps(inv);
    for (int64_t i = 0; i < full; i += 8)
      _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), invv));
    for (int64_t i = full; i < n; ++i) x[i] *= inv;
  }
}

}  // namespace internal

void SoftmaxRows(float* s, int64_t rows, int64_t n, int64_t ld) {
  if (GetCpuFeatures().avx512) {
    internal::SoftmaxRowsAvx512(s, rows, n, ld);
  } else if (GetCpuFeatures().avx2) {
    internal::SoftmaxRowsAvx2(s, rows, n, ld);
  } else {
    internal::SoftmaxRowsPortable(s, rows, n, ld);
  }
}

void SiluMul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  if (GetCpuFeatures().avx512) {
    internal::SiluMulAvx512(gate_up, rows, inter, out);
  } else if (GetCpuFeatures().avx2) {
    internal::SiluMulAvx2(gate_up, rows, inter, out);
  } else {
    internal::SiluMulPortable(gate_up, rows, inter, out);
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace pagellm::kernels

#pragma GCC diagnostic pop
