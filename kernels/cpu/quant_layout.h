// The packed layout of each GGML weight type QuantMatmul multiplies (internal to the CPU
// kernels: quant_matmul.cc packs and runs the portable kernel, quant_matmul_avx512.cc the
// vector one; both read the layout from here so they cannot disagree).
//
// A packed group-block covers 8 output rows x 32 input elements and is laid out as
//   [scales: scale_bytes][quants: 128 bytes of nibbles, or 256 bytes][high bits: 0, 32 or 64]
// Quants are unsigned (the weight offset is removed in integer arithmetic, see `offset`), and
// interleaved so that int32 lane r of a VNNI dot product belongs to row r: "vector" t (t =
// 0..7) holds, at bytes 4r..4r+3, row r's quants of elements 4t..4t+3. With nibbles, vectors t
// and t+4 share 32 bytes (low / high nibble). 5-bit quants add one 32-byte plane: bit t of
// byte 4r+i is bit 4 of vector t's byte 4r+i. 6-bit quants add two: bits 2s..2s+1 of plane k,
// byte 4r+i, are bits 4..5 of vector 4k+s's byte 4r+i.
//
// Scales, by `Scale`:
//   kF16      d[8] fp16                       w = d * (u - offset)
//   kF16Min   d[8] fp16, m[8] fp16            w = d * u + m
//   kSubK     sc[8] u8, mn[8] u8; super d[8], -dmin[8] fp32 per row and 256 elements
//                                             w = (d * sc) * u + (-dmin * mn)
//   kHalves   sc_lo[8] i8, sc_hi[8] i8 (elements 0..15, 16..31); super d[8] fp32
//                                             w = d * (sc_half * (u - offset))
//   kSuper    none; super d[8] fp32           w = d * (u - offset)
// (d * sc and dmin * mn of a fp16 and a 6-bit integer are exact in fp32, so these are ggml's
// dequantized values.)
#ifndef PAGELLM_KERNELS_CPU_QUANT_LAYOUT_H_
#define PAGELLM_KERNELS_CPU_QUANT_LAYOUT_H_

#include <cstdint>

#include "common/ggml_type.h"

namespace pagellm::kernels::internal {

enum class Scale { kF16, kF16Min, kSubK, kHalves, kSuper };

struct PackedLayout {
  Scale scale;
  int bits;              // 4, 5, 6 or 8
  int offset;            // subtracted from the unsigned quants (per 16-element half for kHalves)
  int64_t scale_bytes;   // per group-block
  int64_t super_floats;  // per group and 256 elements: 8 (d) or 16 (d, -dmin); 0 if none
  bool ok;               // a type QuantMatmul takes

  constexpr bool has_min() const { return scale == Scale::kF16Min || scale == Scale::kSubK; }
  constexpr int64_t quant_bytes() const { return bits == 8 ? 256 : 128; }
  constexpr int64_t high_bytes() const { return bits == 5 ? 32 : bits == 6 ? 64 : 0; }
  constexpr int64_t block_bytes() const { return scale_bytes + quant_bytes() + high_bytes(); }
};

constexpr PackedLayout LayoutOf(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_0:
      return {Scale::kF16, 4, 8, 16, 0, true};
    case GgmlType::kQ4_1:
      return {Scale::kF16Min, 4, 0, 32, 0, true};
    case GgmlType::kQ5_0:
      return {Scale::kF16, 5, 16, 16, 0, true};
    case GgmlType::kQ5_1:
      return {Scale::kF16Min, 5, 0, 32, 0, true};
    case GgmlType::kQ8_0:
      return {Scale::kF16, 8, 128, 16, 0, true};
    case GgmlType::kQ4_K:
      return {Scale::kSubK, 4, 0, 16, 16, true};
    case GgmlType::kQ5_K:
      return {Scale::kSubK, 5, 0, 16, 16, true};
    case GgmlType::kQ6_K:
      return {Scale::kHalves, 6, 32, 16, 8, true};
    case GgmlType::kQ8_K:
      return {Scale::kSuper, 8, 128, 0, 8, true};
    default:
      return {Scale::kF16, 8, 0, 0, 0, false};
  }
}

// The super-block floats of group g, for the 32-element block b (nb blocks per row).
inline const float* SuperOf(const float* super, const PackedLayout& l, int64_t g, int64_t b,
                            int64_t nb) {
  return super + (g * (nb / 8) + b / 8) * l.super_floats;
}

}  // namespace pagellm::kernels::internal

#endif  // PAGELLM_KERNELS_CPU_QUANT_LAYOUT_H_
