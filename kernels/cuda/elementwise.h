// The elementwise kernels of a Llama-family layer on the GPU, plus the conversions used when
// weights are loaded: embedding gather into the fp32 residual, SiLU-and-mul, float-type
// conversion, and random fill (--load-format dummy, generated on the device).
//
// Launchers never allocate and return cudaError_t (cudaErrorInvalidValue for a bad shape or
// dtype). All pointers are device pointers; element counts are in elements.
#ifndef PAGELLM_KERNELS_CUDA_ELEMENTWISE_H_
#define PAGELLM_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda {

// residual[t][:] = table[ids[t] - vocab_begin][:] widened to fp32, for `rows` tokens, where
// vocab_begin <= ids[t] < vocab_begin + table_rows, and 0 for the other ids (another
// tensor-parallel rank's rows: summing the ranks' outputs gives the embedding). table is
// [table_rows][dim] in `dtype` (kBF16 or kF16). The whole table is vocab_begin 0, table_rows the
// vocabulary.
cudaError_t LaunchEmbedding(const void* table, KvDtype dtype, const int32_t* ids, int64_t rows,
                            int64_t dim, int64_t vocab_begin, int64_t table_rows, float* residual,
                            cudaStream_t stream);

// dst[r][s * cols + c] = src[s][r][c] for s < shards, r < rows, c < cols: the vocabulary-parallel
// logits of `shards` ranks, all-gathered rank after rank, as one [rows][shards * cols] matrix.
cudaError_t LaunchInterleaveShards(const float* src, int64_t shards, int64_t rows, int64_t cols,
                                   float* dst, cudaStream_t stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][inter + i], computed in fp32 and rounded once;
// gate_up rows hold 2 * inter elements, out rows inter. dtype kBF16 or kF16.
cudaError_t LaunchSiluMul(const void* gate_up, int64_t rows, int64_t inter, KvDtype dtype,
                          void* out, cudaStream_t stream);

// dst[i] = src[i] converted (round to nearest even) for n elements; each dtype any of kF32,
// kF16, kBF16.
cudaError_t LaunchConvert(const void* src, KvDtype src_dtype, int64_t n, void* dst,
                          KvDtype dst_dtype, cudaStream_t stream);

// dst[i] = uniform in [-scale, scale), a pure function of (seed, i): the same on any device and
// launch shape. dst_dtype any of kF32, kF16, kBF16.
cudaError_t LaunchFillUniform(void* dst, KvDtype dst_dtype, int64_t n, uint64_t seed, float scale,
                              cudaStream_t stream);

// dst[i] = value for n elements of dst_dtype (kF32, kF16, kBF16).
cudaError_t LaunchFillConstant(void* dst, KvDtype dst_dtype, int64_t n, float value,
                               cudaStream_t stream);

}  // namespace pagellm::kernels::cuda

#endif  // PAGELLM_KERNELS_CUDA_ELEMENTWISE_H_
