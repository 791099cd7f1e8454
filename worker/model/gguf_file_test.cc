#include "worker/model/gguf_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/model/gguf_test_bytes.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

// ---- A tiny GGUF writer: builds files byte by byte so tests can also build broken ones. ----

constexpr uint32_t kMagic = 0x46554747;

using gguf_test::Le;
using gguf_test::Str;
using gguf_test::Type;

// One metadata record with an already-encoded value.
std::string Kv(std::string_view key, GgufValueType t, const std::string& value) {
  return Str(key) + Type(t) + value;
}
std::string KvU32(std::string_view key, uint32_t v) {
  return Kv(key, GgufValueType::kUint32, Le(v));
}
std::string KvStr(std::string_view key, std::string_view v) {
  return Kv(key, GgufValueType::kString, Str(v));
}
// The encoded value of an array (element type, count, then the already-encoded elements).
std::string ArrayValue(GgufValueType elem, uint64_t count, const std::string& elems) {
  return Type(elem) + Le(count) + elems;
}

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type = static_cast<uint32_t>(GgmlType::kF32);
  uint64_t offset = 0;
};

std::string TensorInfo(const TensorSpec& t) {
  std::string s = Str(t.name) + Le<uint32_t>(t.dims.size());
  for (uint64_t d : t.dims) s += Le(d);
  return s + Le(t.type) + Le(t.offset);
}

struct FileSpec {
  uint32_t magic = kMagic;
  uint32_t version = 3;
  std::vector<std::string> kvs;  // from Kv()
  std::vector<TensorSpec> tensors;
  std::optional<uint64_t> tensor_count;  // overrides tensors.size()
  std::optional<uint64_t> kv_count;      // overrides kvs.size()
  uint64_t alignment = 32;               // padding used before the data section
  std::string data;                      // the data section
};

std::string Build(const FileSpec& f) {
  std::string s = Le(f.magic) + Le(f.version) + Le(f.tensor_count.value_or(f.tensors.size())) +
                  Le(f.kv_count.value_or(f.kvs.size()));
  for (const std::string& kv : f.kvs) s += kv;
  for (const TensorSpec& t : f.tensors) s += TensorInfo(t);
  s.resize((s.size() + f.alignment - 1) / f.alignment * f.alignment, '\0');
  return s + f.data;
}

// A valid file: two tensors (F32 [4, 2] at 0 and Q8_0 [32] at 32) and a few keys.
FileSpec ValidSpec() {
  FileSpec f;
  f.kvs = {KvStr("general.architecture", "llama"), KvU32("llama.block_count", 2)};
  f.tensors = {{"a.weight", {4, 2}, static_cast<uint32_t>(GgmlType::kF32), 0},
               {"b.weight", {32}, static_cast<uint32_t>(GgmlType::kQ8_0), 32}};
  f.data.resize(32 + 34);
  for (size_t i = 0; i < f.data.size(); ++i) f.data[i] = static_cast<char>(i * 7 + 1);
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const FileSpec& f,
                                                const GgufFile::Limits& limits = {}) {
  return GgufFile::FromBytes(Build(f), limits);
}

// Expects InvalidArgument whose message contains `needle`.
void ExpectInvalid(const FileSpec& f, std::string_view needle,
                   const GgufFile::Limits& limits = {}) {
  auto r = Parse(f, limits);
  ASSERT_FALSE(r.ok()) << "accepted a file that should fail with: " << needle;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(needle));
}

// ---- Valid files ----

class GgufFileVersionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufFileVersionTest, RoundTripsEveryValueType) {
  FileSpec f = ValidSpec();
  f.version = GetParam();
  f.kvs = {
      Kv("u8", GgufValueType::kUint8, Le<uint8_t>(200)),
      Kv("i8", GgufValueType::kInt8, Le<int8_t>(-100)),
      Kv("u16", GgufValueType::kUint16, Le<uint16_t>(60000)),
      Kv("i16", GgufValueType::kInt16, Le<int16_t>(-30000)),
      Kv("u32", GgufValueType::kUint32, Le<uint32_t>(4000000000u)),
      Kv("i32", GgufValueType::kInt32, Le<int32_t>(-2000000000)),
      Kv("u64", GgufValueType::kUint64, Le<uint64_t>(18000000000000000000ull)),
      Kv("i64", GgufValueType::kInt64, Le<int64_t>(-9000000000000000000ll)),
      Kv("f32", GgufValueType::kFloat32, Le<float>(1.5f)),
      Kv("f64", GgufValueType::kFloat64, Le<double>(-2.25)),
      Kv("yes", GgufValueType::kBool, Le<uint8_t>(1)),
      Kv("no", GgufValueType::kBool, Le<uint8_t>(0)),
      KvStr("str", "héllo"),
      KvStr("empty_str", ""),
      Kv("arr_u32", GgufValueType::kArray,
         ArrayValue(GgufValueType::kUint32, 3,
                    Le<uint32_t>(1) + Le<uint32_t>(2) + Le<uint32_t>(3))),
      Kv("arr_str", GgufValueType::kArray,
         ArrayValue(GgufValueType::kString, 2, Str("a") + Str("bc"))),
      Kv("arr_empty", GgufValueType::kArray, ArrayValue(GgufValueType::kFloat32, 0, "")),
      Kv("arr_nested", GgufValueType::kArray,
         ArrayValue(GgufValueType::kArray, 2,
                    ArrayValue(GgufValueType::kInt16, 1, Le<int16_t>(-7)) +
                        ArrayValue(GgufValueType::kInt16, 2, Le<int16_t>(8) + Le<int16_t>(9)))),
  };
  auto r = Parse(f);
  ASSERT_TRUE(r.ok()) << r.status();
  const GgufFile& g = **r;
  EXPECT_EQ(g.version(), GetParam());
  EXPECT_EQ(g.alignment(), 32u);
  ASSERT_EQ(g.metadata().size(), f.kvs.size());
  EXPECT_EQ(g.metadata()[0].first, "u8");  // file order

  EXPECT_EQ(*g.GetInt("u8"), 200);
  EXPECT_EQ(*g.GetInt("i8"), -100);
  EXPECT_EQ(*g.GetInt("u16"), 60000);
  EXPECT_EQ(*g.GetInt("i16"), -30000);
  EXPECT_EQ(*g.GetInt("u32"), 4000000000ll);
  EXPECT_EQ(*g.GetInt("i32"), -2000000000);
  EXPECT_EQ(std::get<uint64_t>(g.Find("u64")->v), 18000000000000000000ull);
  EXPECT_FALSE(g.GetInt("u64").ok());  // does not fit in int64
  EXPECT_EQ(*g.GetInt("i64"), -9000000000000000000ll);
  EXPECT_EQ(*g.GetFloat("f32"), 1.5);
  EXPECT_EQ(*g.GetFloat("f64"), -2.25);
  EXPECT_EQ(*g.GetFloat("u8"), 200.0);  // integers convert
  EXPECT_TRUE(*g.Find("yes")->AsBool());
  EXPECT_FALSE(*g.Find("no")->AsBool());
  EXPECT_EQ(*g.GetString("str"), "héllo");
  EXPECT_EQ(*g.GetString("empty_str"), "");
  EXPECT_EQ(g.Find("u8")->type, GgufValueType::kUint8);
  EXPECT_EQ(g.Find("f32")->type, GgufValueType::kFloat32);
  EXPECT_TRUE(g.Find("i16")->IsInteger());
  EXPECT_FALSE(g.Find("f32")->IsInteger());

  const GgufValue* arr = g.Find("arr_u32");
  ASSERT_NE(arr->AsArray(), nullptr);
  EXPECT_EQ(arr->elem_type, GgufValueType::kUint32);
  ASSERT_EQ(arr->AsArray()->size(), 3u);
  EXPECT_EQ(*(*arr->AsArray())[2].AsInt(), 3);
  const auto& strs = *g.Find("arr_str")->AsArray();
  ASSERT_EQ(strs.size(), 2u);
  EXPECT_EQ(*strs[1].AsString(), "bc");
  EXPECT_TRUE(g.Find("arr_empty")->AsArray()->empty());
  EXPECT_EQ(g.Find("arr_empty")->elem_type, GgufValueType::kFloat32);
  const auto& nested = *g.Find("arr_nested")->AsArray();
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[1].elem_type, GgufValueType::kInt16);
  EXPECT_EQ(*(*nested[0].AsArray())[0].AsInt(), -7);
  EXPECT_EQ(*(*nested[1].AsArray())[1].AsInt(), 9);
  EXPECT_EQ(g.Find("u8")->AsArray(), nullptr);

  ASSERT_EQ(g.tensors().size(), 2u);
  const GgufTensorInfo* a = g.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(a->type, GgmlType::kF32);
  EXPECT_EQ(a->num_elements, 8);
  EXPECT_EQ(a->nbytes, 32u);
  EXPECT_EQ(std::memcmp(a->data, f.data.data(), 32), 0);
  const GgufTensorInfo* b = g.FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::kQ8_0);
  EXPECT_EQ(b->nbytes, 34u);
  EXPECT_EQ(b->offset, 32u);
  EXPECT_EQ(std::memcmp(b->data, f.data.data() + 32, 34), 0);
  EXPECT_EQ(g.FindTensor("missing"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, GgufFileVersionTest, ::testing::Values(2u, 3u));

// After the loader has read the vocabulary, the parsed arrays are freed; the rest stays.
TEST(GgufFileTest, ReleaseMetadataArraysKeepsScalarsStringsAndTensors) {
  FileSpec f = ValidSpec();
  f.kvs = {
      Kv("n", GgufValueType::kUint32, Le<uint32_t>(7)),
      KvStr("name", "smol"),
      Kv("tokens", GgufValueType::kArray,
         ArrayValue(GgufValueType::kString, 2, Str("a") + Str("bc"))),
  };
  auto r = Parse(f);
  ASSERT_TRUE(r.ok()) << r.status();
  GgufFile& g = **r;
  ASSERT_EQ(g.Find("tokens")->AsArray()->size(), 2u);
  g.ReleaseMetadataArrays();
  ASSERT_NE(g.Find("tokens")->AsArray(), nullptr);
  EXPECT_TRUE(g.Find("tokens")->AsArray()->empty());
  EXPECT_EQ(*g.GetInt("n"), 7);
  EXPECT_EQ(*g.GetString("name"), "smol");
  const GgufTensorInfo* a = g.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(std::memcmp(a->data, f.data.data(), 32), 0);
}

TEST(GgufFileTest, TypedLookupsReportMissingAndMismatchedKeys) {
  auto r = Parse(ValidSpec());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->GetInt("nope").status().code(), absl::StatusCode::kNotFound);
  auto wrong = (*r)->GetInt("general.architecture");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("general.architecture"));
  EXPECT_FALSE((*r)->GetString("llama.block_count").ok());
  EXPECT_EQ((*r)->Find("nope"), nullptr);
}

TEST(GgufFileTest, HonoursCustomAlignment) {
  FileSpec f = ValidSpec();
  f.alignment = 64;
  f.kvs.push_back(KvU32("general.alignment", 64));
  f.tensors[1].offset = 64;
  f.data.resize(64 + 34, '\x5a');
  auto r = Parse(f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->alignment(), 64u);
  const GgufTensorInfo* b = (*r)->FindTensor("b.weight");
  EXPECT_EQ(std::memcmp(b->data, f.data.data() + 64, 34), 0);
}

TEST(GgufFileTest, AcceptsFileWithoutTensorsOrPadding) {
  FileSpec f;
  f.kvs = {KvStr("general.architecture", "llama")};
  f.alignment = 1;  // no padding after the metadata: no data section at all
  auto r = Parse(f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->tensors().empty());
}

TEST(GgufFileTest, TensorsMayBeStoredOutOfOrder) {
  FileSpec f = ValidSpec();
  f.tensors[0].offset = 64;  // a after b
  f.tensors[1].offset = 0;
  f.data.resize(64 + 32);
  EXPECT_TRUE(Parse(f).ok());
}

TEST(GgufFileTest, EveryTruncatedPrefixIsRejected) {
  FileSpec f = ValidSpec();
  f.kvs.push_back(Kv("arr", GgufValueType::kArray,
                     ArrayValue(GgufValueType::kString, 2, Str("xy") + Str("z"))));
  const std::string bytes = Build(f);
  ASSERT_TRUE(GgufFile::FromBytes(bytes).ok());
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto r = GgufFile::FromBytes(bytes.substr(0, len));
    ASSERT_FALSE(r.ok()) << "prefix of " << len << " bytes accepted";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
}

// ---- Rejections: one malformation each ----

TEST(GgufFileRejectTest, BadMagic) {
  FileSpec f = ValidSpec();
  f.magic = 0x46554746;
  ExpectInvalid(f, "bad magic");
}

TEST(GgufFileRejectTest, Version1) {
  FileSpec f = ValidSpec();
  f.version = 1;
  ExpectInvalid(f, "version 1 is not supported");
}

TEST(GgufFileRejectTest, UnknownVersion) {
  FileSpec f = ValidSpec();
  f.version = 4;
  ExpectInvalid(f, "unsupported GGUF version 4");
  f.version = 0x03000000;
  ExpectInvalid(f, "big-endian");
}

TEST(GgufFileRejectTest, AbsurdCounts) {
  FileSpec f = ValidSpec();
  f.tensor_count = 1ull << 40;
  ExpectInvalid(f, "tensor count 1099511627776 exceeds the limit");
  f = ValidSpec();
  f.kv_count = ~0ull;
  ExpectInvalid(f, "metadata count");
  f = ValidSpec();
  f.kv_count = 1000;  // under the cap but cannot fit in the file
  ExpectInvalid(f, "truncated");
  f = ValidSpec();
  f.tensor_count = 1000;
  ExpectInvalid(f, "truncated");
}

TEST(GgufFileRejectTest, AbsurdStringLength) {
  FileSpec f = ValidSpec();
  f.kvs.push_back(Le<uint64_t>(~0ull) + "x");  // key length 2^64-1
  ExpectInvalid(f, "length 18446744073709551615 exceeds the limit");
  f = ValidSpec();
  f.kvs.push_back(Kv("s", GgufValueType::kString, Le<uint64_t>(1000) + "short"));
  ExpectInvalid(f, "truncated reading value of key 's'");
  GgufFile::Limits small;
  small.max_string_bytes = 4;
  ExpectInvalid(ValidSpec(), "exceeds the limit 4", small);
}

TEST(GgufFileRejectTest, UnknownValueType) {
  FileSpec f = ValidSpec();
  f.kvs.push_back(Kv("weird", static_cast<GgufValueType>(13), Le<uint32_t>(0)));
  ExpectInvalid(f, "key 'weird': unknown value type 13");
  f = ValidSpec();
  f.kvs.push_back(Kv("weird_arr", GgufValueType::kArray, Le<uint32_t>(99) + Le<uint64_t>(0)));
  ExpectInvalid(f, "key 'weird_arr': unknown value type 99");
}

TEST(GgufFileRejectTest, ArrayNestingBeyondLimit) {
  // Depth 4 is allowed, depth 5 is not.
  std::string v = ArrayValue(GgufValueType::kUint8, 1, Le<uint8_t>(1));
  for (int i = 0; i < 3; ++i) v = ArrayValue(GgufValueType::kArray, 1, v);
  FileSpec f = ValidSpec();
  f.kvs.push_back(Kv("deep", GgufValueType::kArray, v));
  EXPECT_TRUE(Parse(f).ok());
  f.kvs.back() = Kv("deep", GgufValueType::kArray, ArrayValue(GgufValueType::kArray, 1, v));
  ExpectInvalid(f, "key 'deep': arrays nested deeper than 4");
}

TEST(GgufFileRejectTest, ArrayLimits) {
  FileSpec f = ValidSpec();
  f.kvs.push_back(
      Kv("big", GgufValueType::kArray, ArrayValue(GgufValueType::kUint32, 1ull << 30, "")));
  ExpectInvalid(f, "key 'big': array length 1073741824 exceeds the limit");
  f = ValidSpec();
  f.kvs.push_back(Kv("big", GgufValueType::kArray, ArrayValue(GgufValueType::kUint32, 1000, "")));
  ExpectInvalid(f, "truncated reading array of 1000 uint32 for key 'big'");
  GgufFile::Limits lim;
  lim.max_total_array_elems = 3;
  f = ValidSpec();
  f.kvs.push_back(Kv("a1", GgufValueType::kArray, ArrayValue(GgufValueType::kUint8, 2, "xy")));
  f.kvs.push_back(Kv("a2", GgufValueType::kArray, ArrayValue(GgufValueType::kUint8, 2, "xy")));
  ExpectInvalid(f, "key 'a2': more than 3 array elements", lim);
}

TEST(GgufFileRejectTest, BadBool) {
  FileSpec f = ValidSpec();
  f.kvs.push_back(Kv("flag", GgufValueType::kBool, Le<uint8_t>(2)));
  ExpectInvalid(f, "key 'flag': bool value 2");
}

TEST(GgufFileRejectTest, BadKeys) {
  FileSpec f = ValidSpec();
  f.kvs.push_back(KvU32("llama.block_count", 3));
  ExpectInvalid(f, "duplicate key 'llama.block_count'");
  f = ValidSpec();
  f.kvs.push_back(KvU32(std::string("a\0b", 3), 3));
  ExpectInvalid(f, "contains NUL");
  f = ValidSpec();
  f.kvs.push_back(KvU32("bad\xff", 3));
  ExpectInvalid(f, "not valid UTF-8");
  f = ValidSpec();
  f.kvs.push_back(KvU32("\xc0\x80", 3));  // overlong NUL
  ExpectInvalid(f, "not valid UTF-8");
  f = ValidSpec();
  f.kvs.push_back(KvU32("", 3));
  ExpectInvalid(f, "empty key");
}

TEST(GgufFileRejectTest, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    FileSpec f = ValidSpec();
    f.kvs.push_back(KvU32("general.alignment", a));
    ExpectInvalid(f, "general.alignment");
  }
  FileSpec f = ValidSpec();
  f.kvs.push_back(KvStr("general.alignment", "32"));
  ExpectInvalid(f, "general.alignment");
}

TEST(GgufFileRejectTest, UnknownGgmlType) {
  FileSpec f = ValidSpec();
  f.tensors[0].type = 4;  // removed Q4_2
  ExpectInvalid(f, "tensor 'a.weight': unknown ggml type 4");
  f.tensors[0].type = 0xFFFFFFFF;
  ExpectInvalid(f, "unknown ggml type 4294967295");
}

TEST(GgufFileRejectTest, BadDims) {
  FileSpec f = ValidSpec();
  f.tensors[0].dims = {4, 1, 1, 1, 2};
  ExpectInvalid(f, "tensor 'a.weight': 5 dims");
  f.tensors[0].dims = {};
  ExpectInvalid(f, "tensor 'a.weight': 0 dims");
  f.tensors[0].dims = {4, 0};
  ExpectInvalid(f, "dim 1 is 0");
  f.tensors[0].dims = {~0ull, 1};  // -1 as int64
  ExpectInvalid(f, "dim 0 is -1");
  f.tensors[0].dims = {1ull << 32, 1ull << 32};
  ExpectInvalid(f, "element count overflows");
  f.tensors[0].dims = {1ull << 61, 2};  // 2^62 elements fit in int64; 2^64 bytes do not
  ExpectInvalid(f, "tensor 'a.weight': byte size overflows");
}

TEST(GgufFileRejectTest, RowNotMultipleOfBlockSize) {
  FileSpec f = ValidSpec();
  f.tensors[1].dims = {16, 2};  // Q8_0 blocks hold 32
  ExpectInvalid(f, "tensor 'b.weight': row size 16 is not a multiple of the q8_0 block size 32");
}

TEST(GgufFileRejectTest, UnalignedTensorOffset) {
  FileSpec f = ValidSpec();
  f.tensors[1].offset = 33;
  ExpectInvalid(f, "tensor 'b.weight': data offset 33 is not a multiple of the alignment 32");
}

TEST(GgufFileRejectTest, TensorDataOutOfFile) {
  FileSpec f = ValidSpec();
  f.data.pop_back();
  ExpectInvalid(f, "tensor 'b.weight': data at offset 32 (+34 bytes) extends past the end");
  f = ValidSpec();
  f.tensors[1].offset = ~0ull & ~31ull;  // begin overflows
  ExpectInvalid(f, "extends past the end");
}

TEST(GgufFileRejectTest, OverlappingTensors) {
  FileSpec f = ValidSpec();
  f.tensors[0].dims = {16};  // 64 bytes at 0 overlaps b at 32
  f.data.resize(64 + 34);
  ExpectInvalid(f, "tensors 'a.weight' and 'b.weight' overlap");
  f = ValidSpec();
  f.tensors[1].offset = 0;  // same offset
  ExpectInvalid(f, "overlap");
}

TEST(GgufFileRejectTest, BadTensorNames) {
  FileSpec f = ValidSpec();
  f.tensors[1].name = "a.weight";
  ExpectInvalid(f, "duplicate tensor name 'a.weight'");
  f = ValidSpec();
  f.tensors[1].name = std::string("b\0", 2);
  ExpectInvalid(f, "contains NUL");
  f = ValidSpec();
  f.tensors[1].name = "";
  ExpectInvalid(f, "empty tensor name");
}

// ---- Files on disk ----

TEST(GgufFileOpenTest, MapsAFileFromDisk) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gguf_file_test_" + std::to_string(getpid())))
          .string();
  FileSpec spec = ValidSpec();
  {
    std::ofstream out(path, std::ios::binary);
    out << Build(spec);
  }
  auto r = GgufFile::Open(path);
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  ASSERT_TRUE(r.ok()) << r.status();
  const GgufTensorInfo* b = (*r)->FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(std::memcmp(b->data, spec.data.data() + 32, 34), 0);
  EXPECT_EQ(*(*r)->GetInt("llama.block_count"), 2);
}

TEST(GgufFileOpenTest, ReportsIoErrors) {
  EXPECT_EQ(GgufFile::Open("/nonexistent/model.gguf").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(GgufFile::Open("/tmp").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufFileOpenTest, OpensTheRealModel) {
  const std::string path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (tools/fetch_model.sh)";
  auto r = GgufFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  const GgufFile& g = **r;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.tensors().size(), 272u);
  EXPECT_EQ(*g.GetInt("llama.block_count"), 30);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  const GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_NE(tokens->AsArray(), nullptr);
  EXPECT_EQ(tokens->AsArray()->size(), 49152u);
  const GgufTensorInfo* emb = g.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(emb->type, GgmlType::kQ8_0);
  EXPECT_EQ(emb->nbytes, 576u * 49152u / 32u * 34u);
}

}  // namespace
}  // namespace pagellm
