// Scalar transcription of ggml's dequantize_row_* (ggml-quants.c) for the block formats listed
// in dequant.h.
//
// Bit-exactness: every output is computed with the same float32 operations in the same order
// as ggml (e.g. Q4_1 is `q * d + m`, Q6_K is `(d * scale) * q`). The file is built with
// -ffp-contract=off so that no compiler fuses a multiply and an add into an FMA, which would
// round differently. Multi-byte fields are read with memcpy: blocks are 2-byte-ish packed and
// a row may start at any address.
#include "kernels/cpu/dequant.h"

#include <bit>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace pagellm::kernels {
void KQuantScaleMin(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

namespace {

constexpr int kQK = 32;     // elements per block of the legacy formats (Q4_0 .. Q8_0)
constexpr int kQK_K = 256;  // elements per super-block of the k-quants

float F16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

// ---- legacy 32-element blocks ----

// Q4_0: {f16 d; u8 qs[16]}: low nibbles are elements 0..15, high nibbles 16..31, offset 8.
void DequantQ4_0(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: {f16 d; f16 m; u8 qs[16]}: y = q * d + m.
void DequantQ4_1(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const float m = F16At(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Fifth bits of Q5_*: bit j of the little-endian u32 qh belongs to element j.
uint32_t LoadQh(const uint8_t* p) {
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  return qh;
}

// Q5_0: {f16 d; u8 qh[4]; u8 qs[16]}: 5-bit values, offset 16.
void DequantQ5_0(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const uint32_t qh = LoadQh(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int hi0 = ((qh >> j) << 4) & 0x10;
    const int hi1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>(((qs[j] & 0x0F) | hi0) - 16) * d;
    y[j + kQK / 2] = static_cast<float>(((qs[j] >> 4) | hi1) - 16) * d;
  }
}

// Q5_1: {f16 d; f16 m; u8 qh[4]; u8 qs[16]}: y = q * d + m.
void DequantQ5_1(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const float m = F16At(b + 2);
  const uint32_t qh = LoadQh(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int hi0 = ((qh >> j) << 4) & 0x10;
    const int hi1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>((qs[j] & 0x0F) | hi0) * d + m;
    y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) | hi1) * d + m;
  }
}

// Q8_0: {f16 d; i8 qs[32]}.
void DequantQ8_0(const uint8_t* b, float* y) {
  const float d = F16At(b);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// ---- k-quants: 256-element super-blocks ----

// Q2_K: {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}. Sub-block s of 16 elements has scale
// `scales[s] & 15` and min `scales[s] >> 4`; 2-bit values, four per byte.
void DequantQ2_K(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = F16At(b + 80);
  const float dmin = F16At(b + 82);
  int is = 0;
  for (int n = 0; n < kQK_K; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}. Sixteen 6-bit signed scales (offset
// 32): low 4 bits from nibbles of bytes 0..7, high 2 bits from bytes 8..11. Values are 2 low
// bits from qs minus 4 when the hmask bit is clear.
void DequantQ3_K(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d_all = F16At(b + 108);
  int scales[16];
  for (int s = 0; s < 16; ++s) {
    const int low = (s < 8 ? packed[s] : packed[s - 8] >> 4) & 0x0F;
    const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
    scales[s] = (low | (high << 4)) - 32;
  }
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < kQK_K; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * static_cast<float>(scales[is++]);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

// Q4_K: {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}: y = (d * sc) * q - (dmin * m).
void DequantQ4_K(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const float dmin = F16At(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int is = 0; is < 8; is += 2, q += 32) {
    int sc, mn;
    KQuantScaleMin(is, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    KQuantScaleMin(is + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

// Q5_K: {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K plus a fifth bit.
void DequantQ5_K(const uint8_t* b, float* y) {
  const float d = F16At(b);
  const float dmin = F16At(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    int sc, mn;
    KQuantScaleMin(is, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    KQuantScaleMin(is + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: 6-bit values, offset 32.
void DequantQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = F16At(b + 208);
  for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

// Q8_K: {f32 d; i8 qs[256]; i16 bsums[16]} (bsums only serve dot products).
void DequantQ8_K(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  for (int j = 0; j < kQK_K; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn BlockFnFor(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return DequantQ4_0;
    case GgmlType::kQ4_1:
      return DequantQ4_1;
    case GgmlType::kQ5_0:
      return DequantQ5_0;
    case GgmlType::kQ5_1:
      return DequantQ5_1;
    case GgmlType::kQ8_0:
      return DequantQ8_0;
    case GgmlType::kQ2_K:
      return DequantQ2_K;
    case GgmlType::kQ3_K:
      return DequantQ3_K;
    case GgmlType::kQ4_K:
      return DequantQ4_K;
    case GgmlType::kQ5_K:
      return DequantQ5_K;
    case GgmlType::kQ6_K:
      return DequantQ6_K;
    case GgmlType::kQ8_K:
      return DequantQ8_K;
    default:
      return nullptr;
  }
}

}  // namespace

absl::Status DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeTraits traits = GetGgmlTypeTraits(type);
  if (traits.name.empty() || !traits.dequantizable) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: unsupported ggml type ",
                                                   traits.name.empty()
                                                       ? absl::StrCat(static_cast<uint32_t>(type))
                                                       : std::string(traits.name)));
  }
  if (n < 0 || n % traits.block_elems != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: ", n, " elements is not a ",
                                                   "multiple of the ", std::string(traits.name),
                                                   " block size ", traits.block_elems));
  }
  const auto* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(float));
      return absl::OkStatus();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = F16At(p + 2 * i);
      return absl::OkStatus();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = Bf16ToFloat(h);
      }
      return absl::OkStatus();
    default:
      break;
  }
  const BlockFn fn = BlockFnFor(type);
  if (fn == nullptr) {  // the traits table and this file disagree
    return absl::InternalError(
        absl::StrCat("dequantize: no kernel for ", std::string(traits.name)));
  }
  const int64_t blocks = n / traits.block_elems;
  for (int64_t i = 0; i < blocks; ++i) {
    fn(p + i * traits.block_bytes, dst + i * traits.block_elems);
  }
  return absl::OkStatus();
}

}  // namespace pagellm::kernels
