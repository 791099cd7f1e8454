// Three paths with the same arithmetic, so that they agree to the bit: each multiply-add is one
// fused fma (std::fma in the portable path, vfmadd in the AVX2 and AVX-512 ones), the dot
// product keeps 16 lanes (element k goes to lane k % 16) folded in lane order, and the update of
// y is one fma per element.
#include "kernels/cpu/lora.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/cpu_features.h"

namespace pagellm::kernels {
namespace {

constexpr int kLanes = 16;

// The elements past the last whole chunk of 16 (their lanes 0 .. n % 16 - 1), then the fold.
float FinishDot(float* lanes, const float* a, const float* x, int64_t k, int64_t n) {
  for (int l = 0; k < n; ++k, ++l) lanes[l] = std::fma(a[k], x[k], lanes[l]);
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

float DotPortable(const float* a, const float* x, int64_t n) {
  float lanes[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = std::fma(a[k + l], x[k + l], lanes[l]);
  }
  return FinishDot(lanes, a, x, k, n);
}

__attribute__((target("avx2,fma"))) float DotAvx2(const float* a, const float* x, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(x + k), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(x + k + 8), hi);
  }
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, lo);
  _mm256_store_ps(lanes + 8, hi);
  return FinishDot(lanes, a, x, k, n);
}

void AxpyPortable(float u, const float* b, float* y, int64_t n) {
  for (int64_t o = 0; o < n; ++o) y[o] = std::fma(u, b[o], y[o]);
}

__attribute__((target("avx2,fma"))) void AxpyAvx2(float u, const float* b, float* y, int64_t n) {
  const __m256 uv = _mm256_set1_ps(u);
  int64_t o = 0;
  for (; o + 8 <= n; o += 8) {
    _mm256_storeu_ps(y + o, _mm256_fmadd_ps(uv, _mm256_loadu_ps(b + o), _mm256_loadu_ps(y + o)));
  }
  for (; o < n; ++o) y[o] = std::fma(u, b[o], y[o]);
}

// R rows at once: each 16 floats of A and of B^T read (from L2: an adapter's layer is a few
// hundred KiB) serve R rows, where row by row the loads would bound the speed. Per row and
// element, the same fmas in the same order as the other paths.
template <int R>
__attribute__((target("avx512f"))) void TileAvx512(const float* x, int64_t ldx, const float* a,
                                                   const float* bt, int64_t rank, int64_t n_in,
                                                   int64_t n_out, float* y, int64_t ldy) {
  float u[R][kMaxLoraRank];
  alignas(64) float lanes[kLanes];
  for (int64_t j = 0; j < rank; ++j) {
    const float* aj = a + j * n_in;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + kLanes <= n_in; k += kLanes) {
      const __m512 av = _mm512_loadu_ps(aj + k);
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(av, _mm512_loadu_ps(x + r * ldx + k), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm512_store_ps(lanes, acc[r]);
      u[r][j] = FinishDot(lanes, aj, x + r * ldx, k, n_in);
    }
  }
  int64_t o = 0;
  if (rank % 8 == 0) {  // the usual ranks: 8 columns of B^T held in registers for the R rows
    for (; o + 16 <= n_out; o += 16) {
      for (int64_t j0 = 0; j0 < rank; j0 += 8) {
        __m512 bv[8];
        for (int jj = 0; jj < 8; ++jj) bv[jj] = _mm512_loadu_ps(bt + (j0 + jj) * n_out + o);
        for (int r = 0; r < R; ++r) {
          float* yr = y + r * ldy + o;
          __m512 yv = _mm512_loadu_ps(yr);
          for (int jj = 0; jj < 8; ++jj) {
            yv = _mm512_fmadd_ps(_mm512_set1_ps(u[r][j0 + jj]), bv[jj], yv);
          }
          _mm512_storeu_ps(yr, yv);
        }
      }
    }
  }
  for (; o + 16 <= n_out; o += 16) {
    for (int r = 0; r < R; ++r) {
      float* yr = y + r * ldy + o;
      __m512 yv = _mm512_loadu_ps(yr);
      for (int64_t j = 0; j < rank; ++j) {
        yv = _mm512_fmadd_ps(_mm512_set1_ps(u[r][j]), _mm512_loadu_ps(bt + j * n_out + o), yv);
      }
      _mm512_storeu_ps(yr, yv);
    }
  }
  for (; o < n_out; ++o) {
    for (int r = 0; r < R; ++r) {
      for (int64_t j = 0; j < rank; ++j) {
        y[r * ldy + o] = std::fma(u[r][j], bt[j * n_out + o], y[r * ldy + o]);
      }
    }
  }
}

template <float (*Dot)(const float*, const float*, int64_t),
          void (*Axpy)(float, const float*, float*, int64_t)>
void AddRows(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
             int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy) {
  float u[kMaxLoraRank];
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    for (int64_t j = 0; j < rank; ++j) u[j] = Dot(a + j * n_in, xr, n_in);
    for (int64_t j = 0; j < rank; ++j) Axpy(u[j], bt + j * n_out, y + r * ldy, n_out);
  }
}

}  // namespace

namespace internal {

void LoraAddRowsPortable(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                         int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy) {
  AddRows<DotPortable, AxpyPortable>(x, ldx, rows, a, bt, rank, n_in, n_out, y, ldy);
}

void LoraAddRowsAvx2(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                     int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy) {
  AddRows<DotAvx2, AxpyAvx2>(x, ldx, rows, a, bt, rank, n_in, n_out, y, ldy);
}

void LoraAddRowsAvx512(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                       int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy) {
  constexpr int kTile = 8;
  int64_t r = 0;
  for (; r + kTile <= rows; r += kTile) {
    TileAvx512<kTile>(x + r * ldx, ldx, a, bt, rank, n_in, n_out, y + r * ldy, ldy);
  }
  for (; r < rows; ++r) TileAvx512<1>(x + r * ldx, ldx, a, bt, rank, n_in, n_out, y + r * ldy, ldy);
}

}  // namespace internal

void LoraAddRows(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                 int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy) {
  if (GetCpuFeatures().avx512) {
    internal::LoraAddRowsAvx512(x, ldx, rows, a, bt, rank, n_in, n_out, y, ldy);
  } else if (GetCpuFeatures().avx2) {
    internal::LoraAddRowsAvx2(x, ldx, rows, a, bt, rank, n_in, n_out, y, ldy);
  } else {
    internal::LoraAddRowsPortable(x, ldx, rows, a, bt, rank, n_in, n_out, y, ldy);
  }
}

}  // namespace pagellm::kernels
