// Dequantization of GGML blocks to fp32 (the reference semantics are ggml's
// dequantize_row_*; tests check bit-exactness against the `gguf` Python package).
// Thread-safe: pure functions.
#ifndef PAGELLM_KERNELS_CPU_DEQUANT_H_
#define PAGELLM_KERNELS_CPU_DEQUANT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/ggml_type.h"
#include "common/half.h"  // the scalar conversions the kernels use

namespace pagellm::kernels {

// Converts `n` elements starting at `src` (which need not be aligned) to fp32 in `dst`.
// Returns InvalidArgument if the type is not dequantizable or `n` is not a multiple of the
// type's block size. REQUIRES: `src` holds n / block_elems * block_bytes bytes; dst holds n floats.
absl::Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// Scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block: 6 bits each, packed in the
// block's 12 scale bytes `q`.
void KQuantScaleMin(int j, const uint8_t* q, int* sc, int* mn);

}  // namespace pagellm::kernels

#endif  // PAGELLM_KERNELS_CPU_DEQUANT_H_
