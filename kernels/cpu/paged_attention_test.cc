#include "kernels/cpu/paged_attention.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "common/fp8.h"
#include "gtest/gtest.h"

namespace pagellm::kernels {
namespace {

constexpr KvDtype kDtypes[] = {KvDtype::kF32, KvDtype::kF16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2};

// The value an fp8 cache holds for x (common/fp8.h, checked against ml_dtypes); x otherwise.
double Stored(float x, KvDtype dt) {
  if (dt == KvDtype::kFp8E4M3) return Fp8E4M3ToFloat(FloatToFp8E4M3(x));
  if (dt == KvDtype::kFp8E5M2) return Fp8E5M2ToFloat(FloatToFp8E5M2(x));
  return x;
}

// One sequence of `len` tokens with random q/k/v, stored through a shuffled block table.
struct Case {
  int64_t len, nh, nkv, hd, bs;
  KvDtype dtype;
};

struct Result {
  std::vector<float> out;  // [len][nh][hd]
  std::vector<float> q, k, v;
};

// Which kernel runs: the specialized AVX-512 tasks where the CPU and shape allow, the generic
// loop with the CPU's vector dot products, or the generic loop with the portable ones.
enum class Path { kSpecialized, kGeneric, kPortable };

Result RunCase(const Case& c, uint32_t seed, bool one_token_at_a_time,
               Path path = Path::kSpecialized) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  Result r;
  r.q.resize(c.len * c.nh * c.hd);
  r.k.resize(c.len * c.nkv * c.hd);
  r.v.resize(c.len * c.nkv * c.hd);
  for (auto* vec : {&r.q, &r.k, &r.v})
    for (auto& x : *vec) x = dist(rng);
  const int64_t blocks = (c.len + c.bs - 1) / c.bs;
  const int64_t pool_blocks = blocks + 3;
  std::vector<int32_t> table(pool_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(seed + 1));
  std::vector<char> kc(pool_blocks * c.nkv * c.bs * c.hd * KvDtypeBytes(c.dtype));
  std::vector<char> vc(kc.size());
  PagedKvLayer layer{kc.data(), vc.data(), c.dtype, c.bs, c.nkv, c.hd};
  std::vector<int64_t> slots(c.len);
  std::vector<int32_t> seq(c.len, 0), pos(c.len);
  for (int64_t p = 0; p < c.len; ++p) {
    slots[p] = table[p / c.bs] * c.bs + p % c.bs;
    pos[p] = static_cast<int32_t>(p);
  }
  WriteKv(layer, r.k.data(), r.v.data(), c.nkv * c.hd, c.len, slots.data());
  r.out.assign(c.len * c.nh * c.hd, 0.0f);
  AttentionWorkspace ws;
  ThreadPool pool(2);
  auto run = [&](int64_t first, int64_t count) {
    AttentionBatch b;
    b.num_tokens = count;
    b.num_heads = c.nh;
    b.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    b.q = r.q.data() + first * c.nh * c.hd;
    b.q_stride = c.nh * c.hd;
    b.out = r.out.data() + first * c.nh * c.hd;
    b.out_stride = c.nh * c.hd;
    b.token_seq = seq.data() + first;
    b.token_pos = pos.data() + first;
    b.block_tables = table.data();
    b.max_blocks_per_seq = pool_blocks;
    if (path == Path::kSpecialized) {
      internal::PagedAttentionTasks(layer, b, &ws, &pool, /*specialized=*/true);
    } else {
      internal::PagedAttentionGeneric(layer, b, &ws, &pool, path == Path::kPortable);
    }
  };
  if (one_token_at_a_time) {
    for (int64_t t = 0; t < c.len; ++t) run(t, 1);
  } else {
    run(0, c.len);
  }
  return r;
}

TEST(PagedAttentionTest, MatchesContiguousReference) {
  for (KvDtype dt : kDtypes) {
    for (int64_t hd : {64, 80, 128}) {
      for (auto [nh, nkv] : {std::pair<int64_t, int64_t>{4, 4}, {9, 3}, {8, 1}}) {
        Case c{37, nh, nkv, hd, 8, dt};
        Result r = RunCase(c, 3, false);
        // fp8: against the values the cache holds, so only the kernel's own rounding counts.
        const double tol = dt == KvDtype::kF16 ? 3e-3 : 1e-5;
        for (int64_t t = 0; t < c.len; ++t)
          for (int64_t h = 0; h < nh; ++h) {
            const int64_t kvh = h / (nh / nkv);
            std::vector<double> s(t + 1);
            double mx = -1e300, sum = 0;
            for (int64_t p = 0; p <= t; ++p) {
              double d = 0;
              for (int64_t i = 0; i < hd; ++i)
                d += static_cast<double>(r.q[(t * nh + h) * hd + i]) *
                     Stored(r.k[(p * nkv + kvh) * hd + i], dt);
              s[p] = d / std::sqrt(static_cast<double>(hd));
              mx = std::max(mx, s[p]);
            }
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (int64_t i = 0; i < hd; ++i) {
              double o = 0;
              for (int64_t p = 0; p <= t; ++p)
                o += s[p] / sum * Stored(r.v[(p * nkv + kvh) * hd + i], dt);
              const float got = r.out[(t * nh + h) * hd + i];
              ASSERT_FALSE(std::isnan(got));
              ASSERT_NEAR(got, o, tol) << "t=" << t << " h=" << h << " i=" << i;
            }
          }
      }
    }
  }
}

TEST(PagedAttentionTest, OutputIndependentOfBlockSizeAndBatching) {
  for (KvDtype dt : kDtypes) {
    Result base = RunCase({50, 9, 3, 64, 16, dt}, 5, false);
    for (int64_t bs : {1, 8, 16, 32}) {
      for (bool single : {false, true}) {
        Result r = RunCase({50, 9, 3, 64, bs, dt}, 5, single);
        EXPECT_EQ(0, std::memcmp(base.out.data(), r.out.data(), base.out.size() * sizeof(float)))
            << "block size " << bs << " single " << single;
      }
    }
  }
}

// The AVX-512 tasks specialized for (head_dim, group) read each K/V row once for the group and
// keep outputs in registers; they must give the generic loop's bits exactly.
TEST(PagedAttentionTest, SpecializedTasksAreBitIdenticalToTheGenericLoop) {
  for (KvDtype dt : kDtypes) {
    for (auto [hd, nh, nkv] : {std::tuple<int64_t, int64_t, int64_t>{64, 9, 3},
                               {64, 4, 4},
                               {64, 8, 4},
                               {64, 8, 2},
                               {64, 8, 1},
                               {128, 4, 4},
                               {128, 8, 4},
                               {128, 8, 2},
                               {128, 32, 8},
                               {128, 8, 1}}) {
      const Case c{70, nh, nkv, hd, 16, dt};
      const Result fast = RunCase(c, 11, false, Path::kSpecialized),
                   generic = RunCase(c, 11, false, Path::kGeneric);
      EXPECT_EQ(0,
                std::memcmp(fast.out.data(), generic.out.data(), fast.out.size() * sizeof(float)))
          << "hd " << hd << " heads " << nh << "/" << nkv;
    }
  }
}

// A serving step's batch: a prompt chunk that attends to its cached prefix (positions 200..263
// of one sequence), two decode tokens of other sequences, a short prompt from position 0, and
// a sequence with two non-consecutive positions (two tiles). The query tiles, whatever their
// split, give each token the bits of the generic loop run one token at a time.
TEST(PagedAttentionTest, MixedBatchTilesAreBitIdenticalToTheGenericLoop) {
  for (KvDtype dt : kDtypes) {
    for (auto [hd, nh, nkv] :
         {std::tuple<int64_t, int64_t, int64_t>{64, 9, 3}, {128, 8, 2}, {64, 4, 4}}) {
      constexpr int64_t kSeqs = 5, kMaxLen = 300, kBs = 16;
      constexpr int64_t kBlocksPerSeq = kMaxLen / kBs + 1;
      std::mt19937 rng(17);
      std::normal_distribution<float> dist;
      std::vector<int32_t> table(kSeqs * kBlocksPerSeq);
      std::iota(table.begin(), table.end(), 0);
      std::shuffle(table.begin(), table.end(), rng);
      std::vector<char> kc(table.size() * nkv * kBs * hd * KvDtypeBytes(dt)), vc(kc.size());
      PagedKvLayer layer{kc.data(), vc.data(), dt, kBs, nkv, hd};
      // Every slot of every sequence written, so that any position can be attended to.
      std::vector<float> kv(kMaxLen * nkv * hd);
      std::vector<int64_t> slots(kMaxLen);
      for (int64_t s = 0; s < kSeqs; ++s) {
        for (auto& x : kv) x = dist(rng);
        for (int64_t p = 0; p < kMaxLen; ++p)
          slots[p] = table[s * kBlocksPerSeq + p / kBs] * kBs + p % kBs;
        WriteKv(layer, kv.data(), kv.data(), nkv * hd, kMaxLen, slots.data());
      }
      std::vector<int32_t> seq, pos;
      for (int32_t p = 200; p < 264; ++p) seq.push_back(0), pos.push_back(p);
      seq.push_back(1), pos.push_back(290);
      seq.push_back(2), pos.push_back(17);
      for (int32_t p = 0; p < 21; ++p) seq.push_back(3), pos.push_back(p);
      seq.push_back(4), pos.push_back(40);
      seq.push_back(4), pos.push_back(120);
      const int64_t n = static_cast<int64_t>(seq.size());
      std::vector<float> q(n * nh * hd);
      for (auto& x : q) x = dist(rng);
      auto run = [&](bool tiles, int64_t first, int64_t count, std::vector<float>* out) {
        AttentionBatch b;
        b.num_tokens = count;
        b.num_heads = nh;
        b.scale = 0.125f;
        b.q = q.data() + first * nh * hd;
        b.q_stride = nh * hd;
        b.out = out->data() + first * nh * hd;
        b.out_stride = nh * hd;
        b.token_seq = seq.data() + first;
        b.token_pos = pos.data() + first;
        b.block_tables = table.data();
        b.max_blocks_per_seq = kBlocksPerSeq;
        AttentionWorkspace ws;
        ThreadPool pool(2);
        if (tiles) {
          internal::PagedAttentionTasks(layer, b, &ws, &pool, /*specialized=*/true);
        } else {
          internal::PagedAttentionGeneric(layer, b, &ws, &pool, /*portable=*/false);
        }
      };
      std::vector<float> tiled(q.size(), NAN), generic(q.size(), NAN);
      run(true, 0, n, &tiled);
      for (int64_t t = 0; t < n; ++t) run(false, t, 1, &generic);
      EXPECT_EQ(0, std::memcmp(tiled.data(), generic.data(), tiled.size() * sizeof(float)))
          << "hd " << hd << " heads " << nh << "/" << nkv;
    }
  }
}

// The generic loop's vector dot products and axpys (AVX-512 or AVX2, whichever the CPU has)
// against the portable ones: the same 16-lane sums, so the same bits; lengths with partial
// blocks and partial 16-position runs.
TEST(PagedAttentionTest, VectorAndPortableLoopsAreBitIdentical) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  for (KvDtype dt : kDtypes) {
    for (auto [len, hd, nh, nkv] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{70, 64, 9, 3},
                                    {37, 128, 8, 2},
                                    {5, 64, 4, 4}}) {
      const Case c{len, nh, nkv, hd, 16, dt};
      const Result vec = RunCase(c, 13, false, Path::kGeneric),
                   portable = RunCase(c, 13, false, Path::kPortable);
      EXPECT_EQ(0, std::memcmp(vec.out.data(), portable.out.data(), vec.out.size() * sizeof(float)))
          << "hd " << hd << " heads " << nh << "/" << nkv << " len " << len;
    }
  }
}

// WriteKv's fp16 conversion: F16C (16 or 8 at a time) against FloatToHalf, over float bit patterns
// spread across the whole range (normals, subnormals, halfway cases, overflow, infinities,
// NaNs with payloads) plus the patterns around each rounding boundary of the half format.
TEST(PagedAttentionTest, VectorFp16ConversionIsFloatToHalf) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 65521) {
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  for (uint32_t exp = 100; exp < 144; ++exp) {  // around 2^-27 .. 2^16: ties in every regime
    for (uint32_t low : {0x0FFFu, 0x1000u, 0x1001u, 0x2FFFu, 0x3000u, 0x3001u, 0x7FFFFFu}) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        x.push_back(std::bit_cast<float>(sign | (exp << 23) | low));
      }
    }
  }
  for (float v : {65504.0f, 65519.99f, 65520.0f, INFINITY, -INFINITY, NAN, -0.0f, 5.96e-8f}) {
    x.push_back(v);
  }
  x.resize(x.size() / 16 * 16 + 5);  // a scalar tail too
  std::vector<uint16_t> vec(x.size()), scalar(x.size());
  internal::FloatsToHalves(x.data(), static_cast<int64_t>(x.size()), vec.data(), true);
  internal::FloatsToHalves(x.data(), static_cast<int64_t>(x.size()), scalar.data(), false);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(scalar[i], vec[i]) << std::hex << std::bit_cast<uint32_t>(x[i]);
  }
}

// WriteKv's fp8 rounding: AVX2 against FloatToFp8E4M3 / FloatToFp8E5M2 (themselves
// checked against ml_dtypes), over float bit patterns spread across the whole range and around
// every rounding boundary of both formats.
TEST(PagedAttentionTest, VectorFp8ConversionIsTheScalarOne) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 65521) {
    x.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  for (uint32_t exp = 100; exp < 150; ++exp) {  // ties and their neighbours in every regime
    for (uint32_t low : {0x07FFFu, 0x08000u, 0x08001u, 0x0FFFFu, 0x10000u, 0x10001u, 0x17FFFFu,
                         0x180000u, 0x180001u, 0x7FFFFFu}) {
      for (uint32_t sign : {0u, 0x80000000u})
        x.push_back(std::bit_cast<float>(sign | (exp << 23) | low));
    }
  }
  for (float v : {448.0f, 464.0f, 465.0f, 57344.0f, 61440.0f, INFINITY, -INFINITY, NAN, -0.0f}) {
    x.push_back(v);
  }
  x.resize(x.size() / 16 * 16 + 5);  // a scalar tail too
  for (KvDtype dt : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    std::vector<uint8_t> vec(x.size()), scalar(x.size());
    internal::FloatsToFp8(x.data(), static_cast<int64_t>(x.size()), dt, vec.data(), true);
    internal::FloatsToFp8(x.data(), static_cast<int64_t>(x.size()), dt, scalar.data(), false);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(scalar[i], vec[i]) << std::hex << std::bit_cast<uint32_t>(x[i]);
    }
  }
}

// The kernels' fp8 widening (F16C, 16 or 8 at a time) against the scalar decoder, every code.
TEST(PagedAttentionTest, VectorFp8WideningIsExact) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<uint8_t> codes(256);
  for (int b = 0; b < 256; ++b) codes[b] = static_cast<uint8_t>(b);
  for (KvDtype dt : {KvDtype::kFp8E4M3, KvDtype::kFp8E5M2}) {
    std::vector<float> vec(256), scalar(256);
    internal::Fp8ToFloats(codes.data(), 256, dt, vec.data(), true);
    internal::Fp8ToFloats(codes.data(), 256, dt, scalar.data(), false);
    for (int b = 0; b < 256; ++b) {
      const float want =
          dt == KvDtype::kFp8E4M3 ? Fp8E4M3ToFloat(codes[b]) : Fp8E5M2ToFloat(codes[b]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(vec[b]) && std::isnan(scalar[b])) << b;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(vec[b]), std::bit_cast<uint32_t>(want)) << b;
        EXPECT_EQ(std::bit_cast<uint32_t>(scalar[b]), std::bit_cast<uint32_t>(want)) << b;
      }
    }
  }
}

}  // namespace
}  // namespace pagellm::kernels
