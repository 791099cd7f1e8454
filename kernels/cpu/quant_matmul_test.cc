#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequant.h"

namespace pagellm::kernels {
namespace {

bool IsKQuant(GgmlType type) { return GetGgmlTypeTraits(type).block_elems == 256; }

// A row length every type takes: `k`, or a multiple of 256 for the K-quants.
int64_t RowLength(GgmlType type, int64_t k) { return IsKQuant(type) ? (k + 255) / 256 * 256 : k; }

void PutHalf(uint8_t* p, float v) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(p, &h, 2);
}

// Random weights in GGML block format: random quants and sub-block scales, finite scales.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t n, int64_t k, std::mt19937& rng) {
  const auto traits = GetGgmlTypeTraits(type);
  const int64_t blocks = n * k / traits.block_elems;
  std::vector<uint8_t> w(blocks * traits.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  for (int64_t blk = 0; blk < blocks; ++blk) {
    uint8_t* p = w.data() + blk * traits.block_bytes;
    switch (type) {
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
        PutHalf(p, scale(rng));
        PutHalf(p + 2, scale(rng) * 8);
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:  // d, dmin; the 6-bit sub-block scales are random bytes
        PutHalf(p, scale(rng) / 32);
        PutHalf(p + 2, scale(rng) / 4);
        break;
      case GgmlType::kQ6_K:  // int8 sub-block scales, then d
        PutHalf(p + 208, scale(rng) / 64);
        break;
      case GgmlType::kQ8_K: {
        const float d = scale(rng);
        std::memcpy(p, &d, 4);
        break;
      }
      default:
        PutHalf(p, scale(rng));
        break;
    }
  }
  return w;
}

std::vector<float> RandomActivations(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Random m x k activations (quantized) and n x k weights (raw and packed) of one type.
struct Problem {
  std::vector<uint8_t> w;
  std::vector<float> x;
  QuantizedActivations qx;
  PackedQuantMatrix packed;
};

Problem MakeProblem(GgmlType type, int64_t m, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.w = RandomWeights(type, n, k, rng);
  p.x = RandomActivations(m, k, rng);
  QuantizeActivations(p.x.data(), m, k, k, &p.qx, nullptr);
  auto packed = PackQuantMatrix(type, p.w.data(), n, k);
  EXPECT_TRUE(packed.ok()) << packed.status();
  if (packed.ok()) p.packed = *std::move(packed);
  return p;
}

class QuantMatmulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantMatmulTest, MatchesDequantizedReference) {
  const GgmlType type = GetParam();
  const int64_t m = 5, n = 37, k = 256;
  Problem p = MakeProblem(type, m, n, k, 7);
  const auto& w = p.w;
  const auto& x = p.x;
  const auto& qx = p.qx;
  std::vector<float> y(m * n);
  QuantMatmul(p.packed, qx, y.data(), n, nullptr);

  // Reference: dequantized weights times the dequantized int8 activations, in double.
  std::vector<float> wf(n * k);
  ASSERT_TRUE(DequantizeRow(type, w.data(), wf.data(), n * k).ok());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < k; ++c) {
        const int64_t slot = qx.Slot(i, c / 32);
        const double xv = static_cast<double>(qx.d[slot]) * qx.qs[slot * 32 + c % 32];
        ref += xv * wf[j * k + c];
        mag += std::fabs(xv * wf[j * k + c]);
      }
      ASSERT_FALSE(std::isnan(y[i * n + j]));
      EXPECT_NEAR(y[i * n + j], ref, 1e-5 * mag + 1e-6) << "row " << i << " col " << j;
    }
  }
  // And close to the exact fp32 product (activation quantization error only).
  double err = 0, norm = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      for (int64_t c = 0; c < k; ++c) ref += static_cast<double>(x[i * k + c]) * wf[j * k + c];
      err += (ref - y[i * n + j]) * (ref - y[i * n + j]);
      norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err / norm), 0.02);
}

// A vector kernel and the CPU check it needs.
struct VectorKernel {
  const char* name;
  bool (*supported)();
  void (*groups)(const PackedQuantMatrix&, int64_t, int64_t, const QuantizedActivations&, float*,
                 int64_t);
};
const VectorKernel kAvx512{"AVX-512 VNNI", [] { return __builtin_cpu_supports("avx512vnni") != 0; },
                           internal::QuantMatmulGroupsAvx512};
const VectorKernel kAvx2{"AVX2",
                         [] {
                           return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                  __builtin_cpu_supports("f16c");
                         },
                         internal::QuantMatmulGroupsAvx2};

// The kernel's result on the shapes that reach each of its code paths equals the portable
// kernel's, bit for bit. n: a partial group of 8 (45), an odd number of groups (70: AVX-512's
// 512-bit pairs and a single group); m: the decode path (2) and the tiled one (7: tiles of 4 and
// 3; 20: AVX-512 unpacking as it goes, a tile of 16 (fetching the next pair's weights) and one
// of 4; 45: AVX-512's pairs unpacked once into a buffer, tiles of 16, 8, 4 and 1; 1000: the same
// in two chunks of rows; 150: AMX where the CPU has it (9 whole panels and one of 6 rows; the
// odd group on VNNI), else the buffered pairs).
void ExpectBitIdentical(const VectorKernel& kernel, GgmlType type) {
  if (!kernel.supported()) GTEST_SKIP() << "no " << kernel.name << " on this CPU";
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 45},
                      {7, 70},
                      {2, 70},
                      {1, 45},
                      {20, 70},
                      {45, 70},
                      {1000, 70},
                      {150, 70},
                      {150, 45}}) {
    const int64_t k = RowLength(type, 576);
    Problem p = MakeProblem(type, m, n, k, 11);
    std::vector<float> a(m * n), b(m * n);
    internal::QuantMatmulGroupsPortable(p.packed, 0, p.packed.groups, p.qx, a.data(), n);
    kernel.groups(p.packed, 0, p.packed.groups, p.qx, b.data(), n);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << m << "x" << n;
  }
}

TEST_P(QuantMatmulTest, Avx512AndPortableAreBitIdentical) {
  ExpectBitIdentical(kAvx512, GetParam());
}
TEST_P(QuantMatmulTest, Avx2AndPortableAreBitIdentical) { ExpectBitIdentical(kAvx2, GetParam()); }

// A matrix too large for the cache (over 4 MB, as a vocabulary's output projection) is run
// with larger chunks of activation rows: the same bits.
void ExpectLargeBitIdentical(const VectorKernel& kernel) {
  if (!kernel.supported()) GTEST_SKIP() << "no " << kernel.name << " on this CPU";
  const int64_t m = 20, n = 6900, k = 576;  // Q8_0: 863 groups of 4,896 bytes
  Problem p = MakeProblem(GgmlType::kQ8_0, m, n, k, 17);
  ASSERT_GT(static_cast<int64_t>(p.packed.data.size()), int64_t{4} << 20);
  std::vector<float> a(m * n), b(m * n);
  internal::QuantMatmulGroupsPortable(p.packed, 0, p.packed.groups, p.qx, a.data(), n);
  kernel.groups(p.packed, 0, p.packed.groups, p.qx, b.data(), n);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(QuantMatmulLargeTest, Avx512AndPortableAreBitIdentical) { ExpectLargeBitIdentical(kAvx512); }
TEST(QuantMatmulLargeTest, Avx2AndPortableAreBitIdentical) { ExpectLargeBitIdentical(kAvx2); }

TEST_P(QuantMatmulTest, RowResultDoesNotDependOnBatchOrThreads) {
  const GgmlType type = GetParam();
  const int64_t m = 9, n = 70, k = RowLength(type, 128);
  Problem p = MakeProblem(type, m, n, k, 13);
  const auto& x = p.x;
  ThreadPool pool(2);
  std::vector<float> batched(m * n);
  QuantMatmul(p.packed, p.qx, batched.data(), n, &pool);
  for (int64_t i = 0; i < m; ++i) {
    QuantizedActivations one;
    QuantizeActivations(x.data() + i * k, 1, k, k, &one, nullptr);
    std::vector<float> single(n);
    QuantMatmul(p.packed, one, single.data(), n, nullptr);
    EXPECT_EQ(0, std::memcmp(single.data(), batched.data() + i * n, n * sizeof(float))) << i;
  }
}

TEST_P(QuantMatmulTest, PackedMatrixTakesAboutTheGgmlSize) {
  const GgmlType type = GetParam();
  const int64_t n = 64, k = 1536;
  std::mt19937 rng(3);
  const std::vector<uint8_t> w = RandomWeights(type, n, k, rng);
  auto packed = PackQuantMatrix(type, w.data(), n, k);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const double bytes = packed->data.size() + packed->super.size() * sizeof(float);
  // At most 6% over (Q4_K: 4.75 bits a weight against 4.5; its fp32 super-block scales).
  EXPECT_LE(bytes, 1.06 * w.size()) << bytes << " vs " << w.size();
}

TEST_P(QuantMatmulTest, PackedRowsDequantizeAsTheSourceRows) {
  const GgmlType type = GetParam();
  const int64_t n = 21, k = RowLength(type, 320);  // a partial last group of 8 rows
  std::mt19937 rng(11);
  const std::vector<uint8_t> w = RandomWeights(type, n, k, rng);
  auto packed = PackQuantMatrix(type, w.data(), n, k);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const int64_t row_bytes =
      k / GetGgmlTypeTraits(type).block_elems * GetGgmlTypeTraits(type).block_bytes;
  std::vector<float> want(k), got(k);
  for (int64_t row = 0; row < n; ++row) {
    ASSERT_TRUE(DequantizeRow(type, w.data() + row * row_bytes, want.data(), k).ok());
    DequantizePackedRow(*packed, row, got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), k * sizeof(float))) << "row " << row;
  }
}

TEST(QuantMatmulPackTest, RowsReportedDoneAreNotReadAgain) {
  // The callback overwrites every row it is told is done; the packing must not change.
  const GgmlType type = GgmlType::kQ4_1;
  const int64_t n = 5000, k = 64;
  std::mt19937 rng(13);
  const std::vector<uint8_t> w = RandomWeights(type, n, k, rng);
  auto want = PackQuantMatrix(type, w.data(), n, k);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<uint8_t> src = w;
  const int64_t row_bytes = k / 32 * GetGgmlTypeTraits(type).block_bytes;
  std::vector<int64_t> calls;
  auto got = PackQuantMatrix(type, src.data(), n, k, [&](int64_t rows) {
    calls.push_back(rows);
    std::fill(src.begin(), src.begin() + rows * row_bytes, 0xA5);
  });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, want->data);
  EXPECT_EQ(calls, (std::vector<int64_t>{2048, 4096, 5000}));
}

TEST(QuantMatmulManyTest, EqualsOneProductPerMatrixOfAnyTypes) {
  // Q, K, V of different types and sizes (a Q4_K_M layer's mix), into one strided output.
  const int64_t k = 512;
  std::mt19937 rng(5);
  const GgmlType types[] = {GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ8_0};
  const int64_t rows[] = {72, 24, 40};
  std::vector<PackedQuantMatrix> packed;
  for (int j = 0; j < 3; ++j) {
    const std::vector<uint8_t> w = RandomWeights(types[j], rows[j], k, rng);
    auto p = PackQuantMatrix(types[j], w.data(), rows[j], k);
    ASSERT_TRUE(p.ok()) << p.status();
    packed.push_back(*std::move(p));
  }
  const int64_t ld = 72 + 24 + 40;
  for (int64_t m : {1, 2, 7}) {
    const std::vector<float> x = RandomActivations(m, k, rng);
    QuantizedActivations qx;
    QuantizeActivations(x.data(), m, k, k, &qx, nullptr);
    std::vector<float> one(m * ld), many(m * ld, -1.0f);
    QuantMatmulJob jobs[3];
    for (int j = 0, col = 0; j < 3; col += rows[j], ++j) {
      QuantMatmul(packed[j], qx, one.data() + col, ld, nullptr);
      jobs[j] = {&packed[j], many.data() + col, ld};
    }
    ThreadPool pool(2);
    QuantMatmulMany(jobs, 3, qx, &pool);
    EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float))) << m;
  }
}

TEST(QuantMatmulActivationsTest, RowByRowEqualsWhole) {
  std::mt19937 rng(9);
  const int64_t m = 5, k = 96;
  const std::vector<float> x = RandomActivations(m, k, rng);
  QuantizedActivations whole, parts;
  QuantizeActivations(x.data(), m, k, k, &whole, nullptr);
  ResizeActivations(m, k, &parts);
  QuantizeActivationRows(x.data(), 3, 5, k, &parts);
  QuantizeActivationRows(x.data(), 0, 3, k, &parts);
  EXPECT_EQ(whole.qs, parts.qs);
  EXPECT_EQ(whole.d, parts.d);
  EXPECT_EQ(whole.s, parts.s);
  EXPECT_EQ(whole.sumq, parts.sumq);
  EXPECT_EQ(whole.sumq_lo, parts.sumq_lo);
  for (int64_t r = 0; r < m; ++r) {  // the first half's sum, as the kernels use it
    for (int64_t b = 0; b < k / 32; ++b) {
      const int64_t slot = whole.Slot(r, b);
      int32_t lo = 0;
      for (int i = 0; i < 16; ++i) lo += whole.qs[slot * 32 + i];
      EXPECT_EQ(lo, whole.sumq_lo[slot]) << r << " " << b;
    }
  }
}

// The block quantizer's two forms agree bit for bit, on ordinary values and on the edges: an
// all-zero block, a block whose quotients land exactly on .5 (rounded half to even: 0.5 -> 0,
// 1.5 -> 2, -2.5 -> -2), negative zeros, and a block of one huge and many tiny values.
using QuantizeRowFn = void (*)(const float*, int64_t, int64_t, int8_t*, float*, float*, int32_t*,
                               int32_t*);

void ExpectQuantizeIdentical(bool supported, QuantizeRowFn vector_fn) {
  if (!supported) GTEST_SKIP() << "the CPU lacks the kernel's instructions";
  std::mt19937 rng(21);
  constexpr int64_t kBlocks = 64;
  std::vector<float> x = RandomActivations(1, kBlocks * 32, rng);
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;
  for (int i = 0; i < 32; ++i) x[32 + i] = -0.0f;
  x[64] = 127.0f;  // d = 1, so every other value is its own quotient
  const float ties[] = {0.5f, 1.5f, -2.5f, 3.5f, -0.5f, 126.5f, -126.5f, 2.5f};
  for (int i = 0; i < 8; ++i) x[65 + i] = ties[i];
  x[96] = 3e38f;
  for (int i = 1; i < 32; ++i) x[96 + i] = 1e-30f * i;
  // Whole rows and a row of 18 blocks (SmolLM2's 576), in consecutive slots or in a panel's
  // (16 slots apart).
  for (auto [nb, stride] : {std::pair<int64_t, int64_t>{kBlocks, 1}, {18, 1}, {18, 16}, {50, 16}}) {
    SCOPED_TRACE(::testing::Message() << nb << " blocks, stride " << stride);
    const int64_t slots = (nb - 1) * stride + 1;
    std::vector<int8_t> qa(slots * 32), qb(slots * 32);
    std::vector<float> da(slots), db(slots), sa(slots), sb(slots);
    std::vector<int32_t> ua(slots), ub(slots), la(slots), lb(slots);
    internal::QuantizeRowPortable(x.data(), nb, stride, qa.data(), da.data(), sa.data(), ua.data(),
                                  la.data());
    vector_fn(x.data(), nb, stride, qb.data(), db.data(), sb.data(), ub.data(), lb.data());
    EXPECT_EQ(qa, qb);
    EXPECT_EQ(0, std::memcmp(da.data(), db.data(), slots * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(sa.data(), sb.data(), slots * sizeof(float)));
    EXPECT_EQ(ua, ub);
    EXPECT_EQ(la, lb);
  }
  std::vector<int8_t> qa(x.size());
  std::vector<float> da(kBlocks), sa(kBlocks);
  std::vector<int32_t> ua(kBlocks), la(kBlocks);
  internal::QuantizeRowPortable(x.data(), kBlocks, 1, qa.data(), da.data(), sa.data(), ua.data(),
                                la.data());
  const int8_t want_ties[] = {0, 2, -2, 4, 0, 126, -126, 2};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(want_ties[i], qa[65 + i]) << ties[i];
  EXPECT_EQ(127, qa[64]);
  EXPECT_EQ(0.0f, da[0]);
}

TEST(QuantMatmulActivationsTest, Avx512AndPortableQuantizeIdentically) {
  ExpectQuantizeIdentical(__builtin_cpu_supports("avx512f"), internal::QuantizeRowAvx512);
}
TEST(QuantMatmulActivationsTest, Avx2AndPortableQuantizeIdentically) {
  ExpectQuantizeIdentical(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                          internal::QuantizeRowAvx2);
}

TEST(QuantMatmulPackTest, RefusesRowsThatAreNotWholeBlocks) {
  std::vector<uint8_t> w(64 * 1024);
  EXPECT_FALSE(PackQuantMatrix(GgmlType::kQ4_K, w.data(), 2, 576).ok());  // 256-element blocks
  EXPECT_FALSE(PackQuantMatrix(GgmlType::kQ4_0, w.data(), 2, 48).ok());
  EXPECT_FALSE(PackQuantMatrix(GgmlType::kF16, w.data(), 2, 64).ok());
  EXPECT_FALSE(PackQuantMatrix(GgmlType::kQ2_K, w.data(), 2, 256).ok());
  EXPECT_TRUE(PackQuantMatrix(GgmlType::kQ6_K, w.data(), 2, 512).ok());
}

INSTANTIATE_TEST_SUITE_P(Types, QuantMatmulTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                           GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                           GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K),
                         [](const auto& info) {
                           return std::string(GetGgmlTypeTraits(info.param).name);
                         });

}  // namespace
}  // namespace pagellm::kernels
