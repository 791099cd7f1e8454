#include "kernels/cpu/lora.h"

namespace pagellm::kernels {

namespace {

// dot(a, x) over n: 16 independent lanes (vectorizable without reassociating), folded in order.
float Dot16(const float* a, const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[k + l] * x[k + l];
  }
  for (int l = 0; k < n; ++k, ++l) lanes[l] += a[k] * x[k];
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

}  // namespace

void LoraAddRows(const float* x, int64_t ldx, int64_t rows, const float* a, const float* bt,
                 int64_t rank, int64_t n_in, int64_t n_out, float* y, int64_t ldy) {
  float u[kMaxLoraRank];
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    for (int64_t j = 0; j < rank; ++j) u[j] = Dot16(a + j * n_in, xr, n_in);
    float* yr = y + r * ldy;
    for (int64_t j = 0; j < rank; ++j) {
      const float uj = u[j];
      const float* bj = bt + j * n_out;
      for (int64_t o = 0; o < n_out; ++o) yr[o] += uj * bj[o];
    }
  }
}

}  // namespace pagellm::kernels
