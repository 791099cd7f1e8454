// Small per-token kernels of a Llama-family layer. All are row-local: a row's result depends
// only on that row, so batching never changes it. Thread-safe (pure functions).
#ifndef PAGELLM_KERNELS_CPU_OPS_H_
#define PAGELLM_KERNELS_CPU_OPS_H_

#include <cstdint>

namespace pagellm::kernels {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim` (row stride dim).
// In-place allowed (y == x).
void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y);

// Rotary embedding applied in place to `rows` rows (row stride `ld` floats), each `num_heads`
// heads of `head_dim`. cos_sin holds, per position, head_dim/2 (cos, sin) pairs. `neox`: rotate
// pairs (i, i + d/2) (Hugging Face layout); otherwise adjacent pairs (2i, 2i+1) (GGUF llama
// layout).
void ApplyRope(float* x, int64_t rows, int64_t ld, int64_t num_heads, int64_t head_dim,
               const int32_t* positions, const float* cos_sin, bool neox);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][inter + i], gate_up rows of 2*inter, where
// silu(g) = g / (1 + ExpApprox(-g)). 16 lanes at a time with AVX-512, bit-identical to the
// portable loop. With rows == 1, out may be gate_up itself (the activation over the gate).
void SiluMul(const float* gate_up, int64_t rows, int64_t inter, float* out);

// e^x within 2 ulp over [-87.3, 88.3] (inputs are clamped to it): x = n ln 2 + r, Cody-Waite
// reduction in two steps, Cephes' degree-5 polynomial for e^r, 2^n put in the exponent bits.
// The same explicit fma sequence as the vector form, so both give the same bits.
float ExpApprox(float x);

// The sum of 16 lanes in a fixed order: lanes i and i + 8 first, then 4, 2 and 1 apart. The
// kernels that accumulate in 16 lanes (element i into lane i % 16) reduce with it, so their
// vector and scalar forms agree bit for bit.
float ReduceLanes16(const float* lanes);

// Softmax in place of `rows` rows of n scores (row r at s + r * ld): e_i = ExpApprox(s_i - max),
// their sum in 16 lanes reduced by ReduceLanes16, then each e_i times the float inverse of the
// sum. Vector and portable forms give the same bits. REQUIRES: n >= 1, finite scores.
void SoftmaxRows(float* s, int64_t rows, int64_t n, int64_t ld);

namespace internal {
void SoftmaxRowsPortable(float* s, int64_t rows, int64_t n, int64_t ld);
void SoftmaxRowsAvx512(float* s, int64_t rows, int64_t n, int64_t ld);
void SiluMulPortable(const float* gate_up, int64_t rows, int64_t inter, float* out);
void SiluMulAvx512(const float* gate_up, int64_t rows, int64_t inter, float* out);
void SoftmaxRowsAvx2(float* s, int64_t rows, int64_t n, int64_t ld);
void SiluMulAvx2(const float* gate_up, int64_t rows, int64_t inter, float* out);
}  // namespace internal

// y += x, n elements.
void AddInPlace(float* y, const float* x, int64_t n);

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_OPS_H_
