#include "common/fp8.h"

#include <bit>
#include <cmath>

#include "common/half.h"

namespace pagellm {
namespace {

// |f|'s bits rounded to a format with `mbits` mantissa bits, exponent `bias` and largest finite
// code `max_code`, to nearest even, saturating: the code without its sign. Works on the bits
// (no libm): WriteKv converts every cached value.
template <int kMbits, int kBias, uint8_t kMaxCode>
uint8_t Encode(uint32_t a) {
  constexpr int kEmin = 1 - kBias;  // the smallest normal exponent
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(kEmin + 127) << 23;
  if (a < kMinNormal) {
    // Subnormal: the float addition rounds |f| to a multiple of 2^(kEmin - kMbits) (to nearest
    // even), as the magic number's unit in the last place is that quantum. 2^kMbits quanta is the
    // smallest normal's code.
    constexpr float kMagic = static_cast<float>(1 << (23 - kMbits)) * std::ldexp(1.0f, kEmin);
    const float rounded = std::bit_cast<float>(a) + kMagic;
    return static_cast<uint8_t>(std::bit_cast<uint32_t>(rounded) - std::bit_cast<uint32_t>(kMagic));
  }
  constexpr int kDrop = 23 - kMbits;
  const uint64_t r = uint64_t{a} + ((uint64_t{1} << (kDrop - 1)) - 1) + ((a >> kDrop) & 1);
  const int64_t exponent = static_cast<int64_t>(r >> 23) - 127 + kBias;
  const int64_t code =
      (exponent << kMbits) | static_cast<int64_t>((r >> kDrop) & ((1 << kMbits) - 1));
  return code > kMaxCode ? kMaxCode : static_cast<uint8_t>(code);
}

template <int kMbits, int kBias, uint8_t kMaxCode>
uint8_t Convert(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7f;  // NaN (E4M3's only NaN code; one of E5M2's)
  return sign | Encode<kMbits, kBias, kMaxCode>(a);
}

}  // namespace

float Fp8E4M3ToFloat(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return std::nanf("");
  const uint16_t h = static_cast<uint16_t>(((b & 0x80) << 8) | ((b & 0x7f) << 7));
  return HalfToFloat(h) * 256.0f;  // exact: every E4M3 value is an fp16 times 2^8
}

float Fp8E5M2ToFloat(uint8_t b) { return HalfToFloat(static_cast<uint16_t>(b << 8)); }

uint8_t FloatToFp8E4M3(float f) { return Convert<3, 7, 0x7e>(f); }

uint8_t FloatToFp8E5M2(float f) { return Convert<2, 15, 0x7b>(f); }

}  // namespace pagellm
