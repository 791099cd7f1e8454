// Checks DequantizeRow bit-exactly against the `gguf` Python package. The expected values are
// written by tools/fixtures/make_dequant_fixture.py (CTest runs it first, see CMakeLists.txt).
#include "kernels/cpu/dequant.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/gguf_file.h"

namespace pagellm::kernels {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

std::filesystem::path FixtureDir() {
  const char* env = std::getenv("PAGELLM_DEQUANT_FIXTURE_DIR");
  return env != nullptr ? env : ".cache/fixtures/dequant";
}

bool HaveFixture() { return std::filesystem::exists(FixtureDir() / "q4_0.bin"); }

std::string NoFixtureMessage() {
  return "no dequant fixture in " + FixtureDir().string() +
         "; generate it with: .venv/bin/python tools/fixtures/make_dequant_fixture.py " +
         FixtureDir().string();
}

std::vector<uint8_t> ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

template <typename T>
std::vector<T> ReadArray(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = ReadBytes(path);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Same bits, or both NaN (NaN payloads may differ between conversion routes).
template <typename Bits, typename Float>
bool SameValue(Bits a, Bits b, Float fa, Float fb) {
  return a == b || (std::isnan(fa) && std::isnan(fb));
}

// Index of the first element that differs bit-wise (NaN-aware), or -1.
int64_t FirstMismatch(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (!SameValue(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]), got[i],
                   want[i])) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

std::string Describe(const std::vector<float>& got, const std::vector<float>& want, int64_t i) {
  std::ostringstream s;
  s << "element " << i << ": got " << got[i] << " (0x" << std::hex
    << std::bit_cast<uint32_t>(got[i]) << "), want " << std::dec << want[i] << " (0x" << std::hex
    << std::bit_cast<uint32_t>(want[i]) << ")";
  return s.str();
}

// zlib's CRC-32 (the fixture script uses zlib.crc32).
uint32_t Crc32(const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// ---- Every type against the gguf package ----

struct TypeCase {
  const char* file;  // fixture base name
  GgmlType type;
};

void PrintTo(const TypeCase& c, std::ostream* os) { *os << c.file; }

class DequantFixtureTest : public ::testing::TestWithParam<TypeCase> {
 protected:
  void SetUp() override {
    if (!HaveFixture()) GTEST_SKIP() << NoFixtureMessage();
    input_ = ReadBytes(FixtureDir() / (std::string(GetParam().file) + ".bin"));
    expected_ = ReadArray<float>(FixtureDir() / (std::string(GetParam().file) + ".f32"));
    traits_ = GetGgmlTypeTraits(GetParam().type);
    ASSERT_FALSE(expected_.empty());
    ASSERT_EQ(expected_.size() % traits_.block_elems, 0u);
    ASSERT_EQ(input_.size(),
              expected_.size() / traits_.block_elems * static_cast<size_t>(traits_.block_bytes));
  }

  int64_t n() const { return static_cast<int64_t>(expected_.size()); }

  std::vector<uint8_t> input_;
  std::vector<float> expected_;
  GgmlTypeTraits traits_{};
};

TEST_P(DequantFixtureTest, MatchesGgufBitExactly) {
  std::vector<float> got(expected_.size(), -1.0f);
  ASSERT_TRUE(DequantizeRow(GetParam().type, input_.data(), got.data(), n()).ok());
  const int64_t bad = FirstMismatch(got, expected_);
  EXPECT_EQ(bad, -1) << Describe(got, expected_, bad);
}

TEST_P(DequantFixtureTest, MatchesAtMisalignedSource) {
  for (size_t shift : {1, 2, 3}) {
    std::vector<uint8_t> buf(input_.size() + shift);
    std::memcpy(buf.data() + shift, input_.data(), input_.size());
    std::vector<float> got(expected_.size(), -1.0f);
    ASSERT_TRUE(DequantizeRow(GetParam().type, buf.data() + shift, got.data(), n()).ok());
    const int64_t bad = FirstMismatch(got, expected_);
    EXPECT_EQ(bad, -1) << "source offset " << shift << ": " << Describe(got, expected_, bad);
  }
}

TEST_P(DequantFixtureTest, BlockByBlockEqualsWholeRow) {
  std::vector<float> got(expected_.size(), -1.0f);
  for (int64_t b = 0; b < n() / traits_.block_elems; ++b) {
    ASSERT_TRUE(DequantizeRow(GetParam().type, input_.data() + b * traits_.block_bytes,
                              got.data() + b * traits_.block_elems, traits_.block_elems)
                    .ok());
  }
  EXPECT_EQ(FirstMismatch(got, expected_), -1);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, DequantFixtureTest,
    ::testing::Values(TypeCase{"f32", GgmlType::kF32}, TypeCase{"f16", GgmlType::kF16},
                      TypeCase{"bf16", GgmlType::kBF16}, TypeCase{"q4_0", GgmlType::kQ4_0},
                      TypeCase{"q4_1", GgmlType::kQ4_1}, TypeCase{"q5_0", GgmlType::kQ5_0},
                      TypeCase{"q5_1", GgmlType::kQ5_1}, TypeCase{"q8_0", GgmlType::kQ8_0},
                      TypeCase{"q2_k", GgmlType::kQ2_K}, TypeCase{"q3_k", GgmlType::kQ3_K},
                      TypeCase{"q4_k", GgmlType::kQ4_K}, TypeCase{"q5_k", GgmlType::kQ5_K},
                      TypeCase{"q6_k", GgmlType::kQ6_K}, TypeCase{"q8_k", GgmlType::kQ8_K}),
    [](const ::testing::TestParamInfo<TypeCase>& info) { return std::string(info.param.file); });

// ---- Argument checks ----

TEST(DequantizeRowTest, RejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(512);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ4_0, src.data(), dst.data(), 31).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ6_K, src.data(), dst.data(), 128).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kF32, src.data(), dst.data(), -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ8_1, src.data(), dst.data(), 32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(static_cast<GgmlType>(99), src.data(), dst.data(), 32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DequantizeRow(GgmlType::kQ4_K, src.data(), dst.data(), 0).ok());
}

// ---- Scalar conversions ----

TEST(HalfConversionTest, KnownValues) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(std::bit_cast<uint32_t>(HalfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(HalfToFloat(0x7C00), INFINITY);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));

  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // the tie rounds to even: infinity
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2: even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: stays even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie: rounds up to even
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  const uint16_t nan = FloatToHalf(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(HalfConversionTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
    }
  }
}

TEST(HalfConversionTest, FloatToHalfMatchesNumpy) {
  if (!HaveFixture()) GTEST_SKIP() << NoFixtureMessage();
  const auto in = ReadArray<float>(FixtureDir() / "f32_to_f16.in");
  const auto want = ReadArray<uint16_t>(FixtureDir() / "f32_to_f16.out");
  ASSERT_EQ(in.size(), want.size());
  ASSERT_FALSE(in.empty());
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t got = FloatToHalf(in[i]);
    ASSERT_TRUE(SameValue(got, want[i], HalfToFloat(got), HalfToFloat(want[i])))
        << "input 0x" << std::hex << std::bit_cast<uint32_t>(in[i]) << ": got 0x" << got
        << ", want 0x" << want[i];
  }
}

TEST(Bf16ConversionTest, KnownValues) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC040), -3.0f);
  EXPECT_EQ(Bf16ToFloat(0x7F80), INFINITY);
  EXPECT_EQ(std::bit_cast<uint32_t>(Bf16ToFloat(0x0001)), 0x00010000u);
}

// ---- Whole tensors of the real model ----

TEST(DequantModelTest, WholeTensorsMatchGguf) {
  if (!HaveFixture()) GTEST_SKIP() << NoFixtureMessage();
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " absent";
  std::ifstream list(FixtureDir() / "model_tensors.txt");
  auto file = GgufFile::Open(kModel);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string name;
  int64_t count;
  uint32_t crc;
  int checked = 0;
  while (list >> name >> count >> crc) {
    const GgufTensorInfo* t = (*file)->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->num_elements, count) << name;
    std::vector<float> out(static_cast<size_t>(count));
    ASSERT_TRUE(DequantizeRow(t->type, t->data, out.data(), count).ok()) << name;
    EXPECT_EQ(Crc32(out.data(), out.size() * sizeof(float)), crc) << name;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "fixture was made without the model; rerun the script";
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace pagellm::kernels
