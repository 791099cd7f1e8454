// FloatToBf16 against its definition: the nearest bfloat16, ties to even (checked by exhaustive
// round trips and by the halfway points between neighbours). fp16 has its own table-driven test
// against numpy in tests/dequant_test.cc.
#include "common/half.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(Bf16Test, EveryBf16ValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToBf16(f), h) << std::hex << h;
    }
  }
}

TEST(Bf16Test, HalfwayPointsRoundToEven) {
  // Between bf16 neighbours 1.0 (0x3F80) and 1.0078125 (0x3F81): the midpoint goes to the even
  // 0x3F80; the midpoint above 0x3F81 goes up to 0x3F82. Just past a midpoint rounds up.
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F807FFFu)), 0x3F80);
  // The largest finite float rounds to infinity; -0 keeps its sign.
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
}

}  // namespace
}  // namespace pagellm
