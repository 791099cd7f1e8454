// Design: GCC/Clang vector extensions (8 floats) rather than intrinsics, so one source serves
// both clones (target_clones: AVX2 and baseline, where each 8-wide op becomes two SSE ops).
// Loops take full 8-float groups with fixed-size loads and one padded group at the end; sums
// run in float lanes per kBlock ids and are then added in double.
#include "worker/backend/cpu/sampler_row_ops.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace pagellm::row_ops {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#define PAGELLM_MULTIVERSION __attribute__((target_clones("avx2", "default")))

using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));

// ABI rule: a function built for one target must not pass 32-byte vectors by value to one built
// for another (AVX2 passes them in registers, baseline in memory). So the helpers that take or
// return vectors by value are always_inline (inlined even at -O0, into either clone), and the
// loop bodies, lambdas that may stay out of line at -O0, take them by reference. GCC's -Wpsabi
// note about by-value vectors is therefore moot here and silenced for the file.
#pragma GCC diagnostic ignored "-Wpsabi"
#define PAGELLM_VINLINE inline __attribute__((always_inline))

PAGELLM_VINLINE F8 SplatF(float x) { return F8{x, x, x, x, x, x, x, x}; }
PAGELLM_VINLINE I8 SplatI(int32_t x) { return I8{x, x, x, x, x, x, x, x}; }

PAGELLM_VINLINE F8 Load(const float* x) {
  F8 v;
  std::memcpy(&v, x, sizeof(v));
  return v;
}

// Calls body(i, v, lanes) (v by const reference) for each group of 8 floats of x[0, n), the
// last one padded with `pad` (lanes < 8 there). Full groups use fixed-size loads.
template <typename Body>
PAGELLM_VINLINE void ForEach8(const float* x, int64_t n, float pad, Body body) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F8 v = Load(x + i);
    body(i, v, 8);
  }
  if (i < n) {
    F8 v = SplatF(pad);
    std::memcpy(&v, x + i, sizeof(float) * (n - i));
    body(i, v, static_cast<int>(n - i));
  }
}

// Stores the first `lanes` lanes of v to y.
PAGELLM_VINLINE void Store(float* y, F8 v, int lanes) {
  if (lanes == 8) {
    std::memcpy(y, &v, sizeof(v));
  } else {
    std::memcpy(y, &v, sizeof(float) * lanes);
  }
}

// exp(x) for x <= 0 (-inf allowed), lane-wise: Cody-Waite reduction x = n ln2 + r and a
// degree-7 polynomial for exp(r) (the classic Cephes expf coefficients). Returns 0 below -87.
PAGELLM_VINLINE F8 ExpNonPositive8(F8 x) {
  const I8 tiny = x < SplatF(-87.0f);
  const F8 xc = tiny ? SplatF(-87.0f) : x;
  const F8 magic = SplatF(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer.
  const F8 shifted = xc * SplatF(1.44269504088896341f) + magic;
  const F8 n = shifted - magic;
  F8 r = xc - n * SplatF(0.693359375f);
  r = r + n * SplatF(2.12194440e-4f);
  F8 p = SplatF(1.9875691500e-4f);
  p = p * r + SplatF(1.3981999507e-3f);
  p = p * r + SplatF(8.3334519073e-3f);
  p = p * r + SplatF(4.1665795894e-2f);
  p = p * r + SplatF(1.6666665459e-1f);
  p = p * r + SplatF(5.0000001201e-1f);
  p = p * (r * r) + r + SplatF(1.0f);
  const I8 ni = std::bit_cast<I8>(shifted) - std::bit_cast<I8>(magic);
  const F8 y = p * std::bit_cast<F8>((ni + 127) << 23);
  return tiny ? SplatF(0.0f) : y;
}

PAGELLM_VINLINE double SumLanes(F8 v) {
  double s = 0.0;
  for (int l = 0; l < 8; ++l) s += v[l];
  return s;
}

}  // namespace

PAGELLM_MULTIVERSION RowPeak ScanPeak(const float* x, int64_t n) {
  F8 best = SplatF(kNegInf);
  I8 best_id = SplatI(-1);
  I8 nan = SplatI(0);
  I8 id = I8{0, 1, 2, 3, 4, 5, 6, 7};
  ForEach8(x, n, kNegInf, [&](int64_t, const F8& v, int) {
    const I8 greater = v > best;  // Strict: each lane keeps its first maximum.
    best = greater ? v : best;
    best_id = greater ? id : best_id;
    nan |= v != v;
    id += 8;
  });
  RowPeak scan{kNegInf, -1, false};
  for (int l = 0; l < 8; ++l) {
    scan.has_nan |= nan[l] != 0;
    if (best_id[l] < 0) continue;
    if (best[l] > scan.value || (best[l] == scan.value && best_id[l] < scan.id)) {
      scan.value = best[l];
      scan.id = best_id[l];
    }
  }
  return scan;
}

PAGELLM_MULTIVERSION void ExpBlocks(const float* w, int64_t n, float max, float inv_t, float* p,
                                    double* block_sums, double* level_mass) {
  if (level_mass != nullptr) std::fill(level_mass, level_mass + kNumKeyLevels, 0.0);
  const F8 max_v = SplatF(max), inv_t_v = SplatF(inv_t), zero = SplatF(0.0f);
  F8 level_v[kNumKeyLevels];
  for (int l = 0; l < kNumKeyLevels; ++l) level_v[l] = SplatF(kKeyLevels[l]);
  for (int64_t start = 0, b = 0; start < n; start += kBlock, ++b) {
    const int64_t end = std::min(n, start + kBlock);
    F8 acc = zero;
    if (level_mass == nullptr) {
      ForEach8(w + start, end - start, kNegInf, [&](int64_t i, const F8& x, int lanes) {
        const F8 v = ExpNonPositive8((x - max_v) * inv_t_v);
        Store(p + start + i, v, lanes);
        acc += v;
      });
    } else {
      F8 acc0 = zero, acc1 = zero, acc2 = zero, acc3 = zero;
      static_assert(kNumKeyLevels == 4);
      ForEach8(w + start, end - start, kNegInf, [&](int64_t i, const F8& x, int lanes) {
        const F8 key = (max_v - x) * inv_t_v;
        const F8 v = ExpNonPositive8(-key);
        Store(p + start + i, v, lanes);
        acc += v;
        acc0 += key < level_v[0] ? v : zero;
        acc1 += key < level_v[1] ? v : zero;
        acc2 += key < level_v[2] ? v : zero;
        acc3 += key < level_v[3] ? v : zero;
      });
      level_mass[0] += SumLanes(acc0);
      level_mass[1] += SumLanes(acc1);
      level_mass[2] += SumLanes(acc2);
      level_mass[3] += SumLanes(acc3);
    }
    block_sums[b] = SumLanes(acc);
  }
}

PAGELLM_MULTIVERSION int32_t CollectBelowKey(const float* w, int32_t n, float max, float inv_t,
                                             float level, int32_t* out) {
  int32_t count = 0;
  ForEach8(w, n, kNegInf, [&](int64_t i, const F8& x, int lanes) {
    const I8 in = (max - x) * inv_t < SplatF(level);
    uint64_t words[4];
    std::memcpy(words, &in, sizeof(words));
    if ((words[0] | words[1] | words[2] | words[3]) == 0) return;
    for (int l = 0; l < lanes; ++l) {
      if (in[l]) out[count++] = static_cast<int32_t>(i + l);
    }
  });
  return count;
}

PAGELLM_MULTIVERSION void ZeroBelow(float* p, int64_t n, float min_p, double* block_sums) {
  for (int64_t start = 0, b = 0; start < n; start += kBlock, ++b) {
    const int64_t end = std::min(n, start + kBlock);
    F8 acc = SplatF(0.0f);
    ForEach8(p + start, end - start, 0.0f, [&](int64_t i, const F8& x, int lanes) {
      const F8 v = x < SplatF(min_p) ? SplatF(0.0f) : x;
      Store(p + start + i, v, lanes);
      acc += v;
    });
    block_sums[b] = SumLanes(acc);
  }
}

PAGELLM_MULTIVERSION int64_t FindNextAbove(const float* x, int64_t from, int64_t n,
                                           float threshold) {
  const F8 t = SplatF(threshold);
  int64_t i = from;
  for (; i + 8 <= n; i += 8) {
    const I8 above = Load(x + i) > t;
    uint64_t words[4];
    std::memcpy(words, &above, sizeof(words));
    if ((words[0] | words[1] | words[2] | words[3]) == 0) continue;
    for (int l = 0;; ++l) {
      if (above[l]) return i + l;
    }
  }
  for (; i < n; ++i) {
    if (x[i] > threshold) return i;
  }
  return n;
}

PAGELLM_MULTIVERSION int32_t CountGreater(const float* x, int64_t n, float threshold) {
  I8 count = SplatI(0);
  ForEach8(x, n, kNegInf, [&](int64_t, const F8& v, int) {
    count -= v > SplatF(threshold);  // true is -1.
  });
  int32_t total = 0;
  for (int l = 0; l < 8; ++l) total += count[l];
  return total;
}

float ExpNonPositive(float x) { return ExpNonPositive8(SplatF(x))[0]; }

}  // namespace pagellm::row_ops
