// IEEE fp16 and bfloat16 scalar conversions, for readers and writers of model files and for the
// CPU kernels. The float -> half direction rounds to nearest even; NaN payloads stay NaN.
// Thread-safe: pure functions.
#ifndef PAGELLM_COMMON_HALF_H_
#define PAGELLM_COMMON_HALF_H_

#include <cstdint>

namespace pagellm {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float Bf16ToFloat(uint16_t h);
// Rounds to nearest even; NaN stays NaN.
uint16_t FloatToBf16(float f);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_HALF_H_
