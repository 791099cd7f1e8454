// FP8 conversions against ml_dtypes: tests/data/fp8/ml_dtypes_fp8.json, made by
// tools/fixtures/make_fp8_fixture.py.
#include "common/fp8.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

constexpr char kFixture[] = "tests/data/fp8/ml_dtypes_fp8.json";

nlohmann::json Format(const char* name) {
  std::ifstream in(kFixture);
  EXPECT_TRUE(in.good()) << kFixture;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() ? j["formats"][name] : nlohmann::json();
}

struct Codec {
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
};

class Fp8Test : public ::testing::TestWithParam<Codec> {};

TEST_P(Fp8Test, EveryCodeDecodesAsMlDtypes) {
  const nlohmann::json f = Format(GetParam().name);
  ASSERT_EQ(f["decode"].size(), 256u);
  for (int b = 0; b < 256; ++b) {
    const float got = GetParam().decode(static_cast<uint8_t>(b));
    if (f["decode"][b].is_null()) {
      EXPECT_TRUE(std::isnan(got)) << "code " << b;
    } else {
      const float want = std::bit_cast<float>(f["decode"][b].get<uint32_t>());
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << "code " << b << ": " << got << " != " << want;
    }
  }
}

TEST_P(Fp8Test, FloatsRoundToNearestEvenAndSaturateAsMlDtypesAfterClipping) {
  const nlohmann::json f = Format(GetParam().name);
  ASSERT_GE(f["encode"].size(), 1000u);
  int wrong = 0;
  for (const nlohmann::json& c : f["encode"]) {
    const float x = std::bit_cast<float>(c[0].get<uint32_t>());
    const uint8_t got = GetParam().encode(x);
    if (got != c[1].get<int>() && ++wrong <= 10) {
      ADD_FAILURE() << x << " -> " << int{got} << ", ml_dtypes " << c[1].get<int>();
    }
  }
  EXPECT_EQ(wrong, 0);
  const uint8_t nan = GetParam().encode(std::nanf(""));
  EXPECT_TRUE(std::isnan(GetParam().decode(nan)));
}

TEST_P(Fp8Test, EveryFiniteValueRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const float x = GetParam().decode(static_cast<uint8_t>(b));
    if (std::isnan(x) || std::isinf(x)) continue;
    EXPECT_EQ(GetParam().encode(x), b) << x;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test,
                         ::testing::Values(Codec{"e4m3", Fp8E4M3ToFloat, FloatToFp8E4M3},
                                           Codec{"e5m2", Fp8E5M2ToFloat, FloatToFp8E5M2}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pagellm
