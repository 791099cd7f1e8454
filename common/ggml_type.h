// GGML tensor element types as numbered in GGUF files, with their block geometry.
// Thread-safe: pure functions over constant tables.
#ifndef PAGELLM_COMMON_GGML_TYPE_H_
#define PAGELLM_COMMON_GGML_TYPE_H_

#include <cstdint>
#include <string_view>

namespace pagellm {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;  // "q4_1"; empty for unknown types.
  int64_t block_elems;    // elements per block (1 for float types).
  int64_t block_bytes;    // bytes per block.
  bool dequantizable;     // kernels/cpu/dequant supports it.
};

// Returns the traits of `raw`, or traits with an empty name if the type id is unknown.
GgmlTypeTraits GetGgmlTypeTraits(uint32_t raw);
inline GgmlTypeTraits GetGgmlTypeTraits(GgmlType t) {
  return GetGgmlTypeTraits(static_cast<uint32_t>(t));
}

}  // namespace pagellm

#endif  // PAGELLM_COMMON_GGML_TYPE_H_
