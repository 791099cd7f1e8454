// Matrix products with bfloat16 weights (the CPU backend's --dtype bfloat16): half the weight
// bytes of fp32, packed once at load (PackBf16Matrix) in the layout of this CPU's kernel:
//
// - kAmxTiles, where the OS lets this process use AMX (CpuFeatures::amx_bf16): the activations
//   are rounded to bf16 (as vLLM's bf16 models compute) and multiplied by `tdpbf16ps`, fp32
//   accumulation in the tile registers. Panels of 32 output rows, each two 16-row halves; a half
//   is a run of 1 KiB tiles, one per 32 input elements: tile row i holds, for each of the 16
//   rows, its pair of elements 2i, 2i + 1 (the VNNI pair layout the instruction takes).
// - kPairs, where the CPU has AVX512-BF16 but no AMX: the activations rounded to bf16 as for
//   kAmxTiles, and `vdpbf16ps` on pairs of elements, fp32 accumulation in registers. Panels of
//   32 rows; for each pair of elements (2i, 2i + 1), two 64-byte lines: lane j of the first holds
//   row 32p + j's two bf16 (element 2i in the low half), lane j of the second row 32p + 16 + j's.
// - kLanes elsewhere: fp32 activations, fused multiply-adds on the weights widened to fp32
//   (exact), so the only rounding beyond fp32's is the weights' own. Panels of 32 rows: for each
//   element k, one 64-byte line of 16 lanes, lane j holding row 32p + j's bf16 in its low half
//   and row 32p + 16 + j's in its high half (two instructions widen a line).
//
// Batch invariance on either path: an output row depends only on its activation row and the
// weights, never on the number of rows, on which rows share a tile, or on the thread count.
// kLanes sums sum_k x[m][k] * w[n][k] by fused multiply-adds in k order from 0.0f, the same on
// the AVX-512 and portable paths (bit-identical); kAmxTiles adds each 32-element block's dot
// product as the hardware does, and kPairs each pair's two products in k order, so their
// results differ from kLanes' in the last bits.
// Thread-safe for concurrent calls on distinct outputs.
#ifndef PAGELLM_KERNELS_CPU_BF16_MATMUL_H_
#define PAGELLM_KERNELS_CPU_BF16_MATMUL_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"

namespace pagellm::kernels {

enum class Bf16Layout { kLanes, kAmxTiles, kPairs };

struct PackedBf16Matrix {
  static constexpr int64_t kPanelRows = 32;
  static constexpr int64_t kTileK = 32;  // kAmxTiles: input elements per tile
  Bf16Layout layout = Bf16Layout::kLanes;
  int64_t n_out = 0;
  int64_t n_in = 0;
  // n_in, rounded up to kTileK for kAmxTiles and to 2 for kPairs (zeros past n_in)
  int64_t k_padded = 0;
  // panels() * k_padded * 16 words of two bf16; rows past n_out in the last panel are zero.
  std::vector<uint32_t> data;

  int64_t panels() const { return (n_out + kPanelRows - 1) / kPanelRows; }
  int64_t bytes() const { return static_cast<int64_t>(data.size() * sizeof(uint32_t)); }
};

// The layout PackBf16Matrix uses on this CPU: kAmxTiles where AMX is permitted; else kPairs where
// the CPU has AVX512-BF16 and `vdpbf16ps` does more multiply-adds per second than fp32 FMA does,
// else kLanes. The rates are measured once, at the first call (internal::MeasureDotRates, well
// under a millisecond): on Zen 4, `vdpbf16ps` does twice FMA's multiply-adds; in an Emerald
// Rapids guest without AMX, half of them, and kLanes' fused multiply-adds on widened weights run
// faster. PAGELLM_BF16_PAIRS=1 (kPairs wherever the CPU has AVX512-BF16) or =0 (never) pins the
// choice without measuring: ranks that must agree bit for bit, or a comparison of the paths.
// Thread-safe.
Bf16Layout PreferredBf16Layout();
const char* Bf16LayoutName(Bf16Layout layout);

// Packs W[n_out][n_in] (fp32, rows contiguous) in PreferredBf16Layout(), rounding each value to
// the nearest bf16 (ties to even; NaN stays NaN). REQUIRES: n_out, n_in > 0.
PackedBf16Matrix PackBf16Matrix(const float* w, int64_t n_out, int64_t n_in);

// y[m][n] = sum_k x[m][k] * w[n][k] for m < rows, n < w.n_out; x has row stride ldx and w.n_in
// columns, y row stride ldy. Splits the panels over `pool` (may be null). Call from one thread
// at a time (kAmxTiles rounds the activations into a buffer of the calling thread's).
void Bf16Matmul(const float* x, int64_t rows, int64_t ldx, const PackedBf16Matrix& w, float* y,
                int64_t ldy, ThreadPool* pool);

// Several products of the same input in one parallel region (Q, K and V; gate and up): the
// input rounded once, the jobs' panels split across the threads together. REQUIRES: the
// matrices share n_in and layout. The same bits as one Bf16Matmul per job.
struct Bf16MatmulJob {
  const PackedBf16Matrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};
void Bf16MatmulMany(const Bf16MatmulJob* jobs, int num_jobs, const float* x, int64_t rows,
                    int64_t ldx, ThreadPool* pool);

namespace internal {
// One core's multiply-add rates in FLOP/s (a multiply and an add count 2): twelve independent
// chains of `vdpbf16ps` (pairs) and of `vfmadd231ps` (fma) on registers, 512-bit, the fastest of
// several alternating rounds. REQUIRES: CpuFeatures::avx512_bf16.
struct DotRates {
  double pairs_flops = 0.0;
  double fma_flops = 0.0;
};
DotRates MeasureDotRates();
// PreferredBf16Layout's rule, given the features, PAGELLM_BF16_PAIRS's value (null when unset;
// other values than "0" and "1" count as unset) and the rates (read only where they decide).
Bf16Layout ChooseBf16Layout(const CpuFeatures& cpu, const char* pairs_env, const DotRates& rates);

// A given layout (kAmxTiles needs CpuFeatures::amx_bf16, kPairs CpuFeatures::avx512_bf16).
PackedBf16Matrix PackBf16MatrixAs(const float* w, int64_t n_out, int64_t n_in, Bf16Layout layout);
// kLanes matrices on the portable path or the CPU's vector one, AVX-512 or AVX2 (`vector`;
// tests compare the two); kAmxTiles ones on AMX and kPairs ones with AVX512-BF16 (`vector`
// ignored).
void Bf16MatmulPath(const Bf16MatmulJob* jobs, int num_jobs, const float* x, int64_t rows,
                    int64_t ldx, ThreadPool* pool, bool vector);
}  // namespace internal

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_BF16_MATMUL_H_
