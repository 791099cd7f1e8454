#include "worker/model/safetensors_file.h"

#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 8-byte little-endian length, then the header, then the data section.
std::string WithLength(uint64_t header_len, std::string_view header, std::string_view data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header_len >> (8 * i)) & 0xff);
  out.append(header);
  out.append(data);
  return out;
}
std::string File(std::string_view header, std::string_view data) {
  return WithLength(header.size(), header, data);
}

// A valid file: "a" F32 [2] = {1, 2}, "b" BF16 [1,1] = 0x3f80 (1.0), "c" I8 [0].
std::string ValidFile() {
  std::string data(10, '\0');
  const float a[2] = {1.0f, 2.0f};
  std::memcpy(data.data(), a, 8);
  data[8] = '\x80';
  data[9] = '\x3f';
  return File(R"({"__metadata__":{"format":"pt"},)"
              R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
              R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[8,10]},)"
              R"("c":{"dtype":"I8","shape":[0],"data_offsets":[10,10]}})",
              data);
}

absl::Status Parse(std::string bytes) {
  return SafetensorsFile::FromBytes(std::move(bytes)).status();
}

// One tensor "t" with the given fields, over `data_bytes` bytes of zeros.
absl::Status ParseOne(absl::string_view fields, size_t data_bytes) {
  return Parse(File(absl::StrCat(R"({"t":{)", fields, "}}"), std::string(data_bytes, '\0')));
}

void ExpectInvalid(const absl::Status& s, std::string_view fragment) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(fragment))) << s;
}

TEST(SafetensorsFileTest, ParsesValidFile) {
  auto file = SafetensorsFile::FromBytes(ValidFile());
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsFile& f = **file;
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].name, "a");  // header order
  EXPECT_THAT(f.metadata(), ElementsAre(std::make_pair(std::string("format"), std::string("pt"))));

  const SafetensorsTensor* a = f.Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, SafetensorsDtype::kF32);
  EXPECT_THAT(a->shape, ElementsAre(2));
  EXPECT_EQ(a->num_elements, 2);
  EXPECT_EQ(a->nbytes, 8u);
  float values[2];
  std::memcpy(values, a->data, 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 2.0f);

  const SafetensorsTensor* b = f.Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, SafetensorsDtype::kBF16);
  EXPECT_THAT(b->shape, ElementsAre(1, 1));
  EXPECT_EQ(b->data[0], 0x80);
  EXPECT_EQ(b->data[1], 0x3f);
  EXPECT_EQ(f.Find("c")->nbytes, 0u);
  EXPECT_EQ(f.Find("missing"), nullptr);
}

TEST(SafetensorsFileTest, GetFloatTensorRefusesOtherDtypesAndMissingNames) {
  auto file = SafetensorsFile::FromBytes(ValidFile());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->GetFloatTensor("a").ok());
  EXPECT_TRUE((*file)->GetFloatTensor("b").ok());
  auto c = (*file)->GetFloatTensor("c");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("I8"));
  EXPECT_EQ((*file)->GetFloatTensor("zz").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsFileTest, AcceptsEmptyHeaderObjectAndScalars) {
  EXPECT_TRUE(Parse(File("{}", "")).ok());
  EXPECT_TRUE(Parse(File("{}  ", "")).ok());  // trailing padding, as writers emit
  EXPECT_TRUE(ParseOne(R"("dtype":"F64","shape":[],"data_offsets":[0,8])", 8).ok());
}

TEST(SafetensorsFileTest, RejectsHeaderLengthPastFileOrCap) {
  ExpectInvalid(Parse(std::string(7, '\0')), "fewer than the 8-byte");
  ExpectInvalid(Parse(WithLength(3, "{}", "")), "exceeds the 2 bytes");
  ExpectInvalid(Parse(WithLength(~0ull, "{}", "")), "exceeds the cap");
  SafetensorsFile::Limits small;
  small.max_header_bytes = 4;
  ExpectInvalid(SafetensorsFile::FromBytes(File("{}    ", ""), small).status(), "exceeds the cap");
}

TEST(SafetensorsFileTest, RejectsBadJson) {
  ExpectInvalid(Parse(File("", "")), "not valid JSON");
  ExpectInvalid(Parse(File("{", "")), "not valid JSON");
  ExpectInvalid(Parse(File(R"({"a":1}x)", "")), "not valid JSON");
  ExpectInvalid(Parse(File("{\"\xff\":{}}", "")), "not valid JSON");  // not UTF-8
  ExpectInvalid(Parse(File(std::string(100, '[') + std::string(100, ']'), "")), "nested deeper");
}

TEST(SafetensorsFileTest, RejectsNonObjectHeaderAndEntries) {
  ExpectInvalid(Parse(File("[]", "")), "not a JSON object");
  ExpectInvalid(Parse(File("7", "")), "not a JSON object");
  ExpectInvalid(Parse(File(R"({"t":[]})", "")), "tensor 't': entry is not an object");
  ExpectInvalid(Parse(File(R"({"__metadata__":[]})", "")), "__metadata__ is not an object");
  ExpectInvalid(Parse(File(R"({"__metadata__":{"k":1}})", "")), "__metadata__ 'k'");
}

TEST(SafetensorsFileTest, RejectsBadDtype) {
  ExpectInvalid(ParseOne(R"("dtype":"Q4","shape":[1],"data_offsets":[0,1])", 1),
                "tensor 't': unknown dtype 'Q4'");
  ExpectInvalid(ParseOne(R"("dtype":"f32","shape":[1],"data_offsets":[0,4])", 4), "unknown dtype");
  ExpectInvalid(ParseOne(R"("dtype":4,"shape":[1],"data_offsets":[0,4])", 4), "dtype");
  ExpectInvalid(ParseOne(R"("shape":[1],"data_offsets":[0,4])", 4), "dtype");
}

TEST(SafetensorsFileTest, RejectsBadShapes) {
  ExpectInvalid(ParseOne(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])", 4),
                "shape entry -1");
  ExpectInvalid(ParseOne(R"("dtype":"F32","shape":[1.0],"data_offsets":[0,4])", 4),
                "not a non-negative integer");
  ExpectInvalid(ParseOne(R"("dtype":"F32","shape":[true],"data_offsets":[0,4])", 4),
                "not a non-negative integer");
  ExpectInvalid(ParseOne(R"("dtype":"F32","shape":"1","data_offsets":[0,4])", 4), "shape");
  // 2^32 * 2^32 overflows uint64; 2^62 elements of F32 overflow the byte count.
  ExpectInvalid(
      ParseOne(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4])", 4),
      "overflows");
  ExpectInvalid(ParseOne(R"("dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4])", 4),
                "overflows");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,1])", 1),
                "not a non-negative integer");  // past uint64: parsed as a float
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1])", 1),
                "9 dims");
}

TEST(SafetensorsFileTest, RejectsShapeThatDisagreesWithOffsets) {
  ExpectInvalid(ParseOne(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])", 4),
                "span 4 bytes but shape [2] of F32 needs 8");
  ExpectInvalid(ParseOne(R"("dtype":"F16","shape":[3],"data_offsets":[0,8])", 8), "needs 6");
}

TEST(SafetensorsFileTest, RejectsBadOffsets) {
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[1],"data_offsets":[1,0])", 1), "begin 1 > end 0");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[1],"data_offsets":[0,1,2])", 1), "pair");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[1],"data_offsets":[-1,0])", 1),
                "not non-negative integers");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[1])", 1), "pair");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[4],"data_offsets":[0,4])", 3),
                "past the data section of 3 bytes");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0])", 1),
                "begin");
}

TEST(SafetensorsFileTest, RejectsOverlappingTensors) {
  ExpectInvalid(Parse(File(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                           std::string(4, '\0'))),
                "overlaps tensor 'a'");
  // Identical ranges.
  ExpectInvalid(Parse(File(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                           std::string(4, '\0'))),
                "overlaps");
  // An empty tensor inside another one's range.
  ExpectInvalid(Parse(File(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                           std::string(4, '\0'))),
                "overlaps");
}

TEST(SafetensorsFileTest, RejectsHolesAndUncoveredBytes) {
  ExpectInvalid(Parse(File(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                           R"("b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})",
                           std::string(5, '\0'))),
                "bytes [2, 3) before tensor 'b' belong to no tensor");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[2],"data_offsets":[1,3])", 3),
                "bytes [0, 1) before tensor 't'");
  ExpectInvalid(ParseOne(R"("dtype":"U8","shape":[2],"data_offsets":[0,2])", 3),
                "bytes [2, 3) at the end");
  ExpectInvalid(Parse(File("{}", "x")), "bytes [0, 1) at the end");
}

TEST(SafetensorsFileTest, RejectsDuplicateNames) {
  ExpectInvalid(Parse(File(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                           std::string(2, '\0'))),
                "duplicate key 'a'");
  ExpectInvalid(ParseOne(R"("dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1])", 1),
                "duplicate key 'dtype'");
}

TEST(SafetensorsFileTest, EveryTruncationIsRejected) {
  const std::string valid = ValidFile();
  ASSERT_TRUE(Parse(valid).ok());
  for (size_t n = 0; n < valid.size(); ++n) {
    absl::Status s = Parse(valid.substr(0, n));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "length " << n << ": " << s;
  }
}

TEST(SafetensorsFileTest, RandomCorruptionNeverCrashes) {
  const std::string valid = ValidFile();
  std::mt19937 rng(7);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    auto file = SafetensorsFile::FromBytes(bytes);
    if (!file.ok()) continue;
    ++accepted;
    // Whatever was accepted must describe bytes inside the buffer.
    for (const SafetensorsTensor& t : (*file)->tensors()) {
      uint64_t sum = 0;
      for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];  // ASan checks the reads
      (void)sum;
    }
  }
  EXPECT_LT(accepted, 20000);
}

TEST(SafetensorsFileTest, OpenReportsMissingFile) {
  auto file = SafetensorsFile::Open("/nonexistent/pagellm/x.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SafetensorsFile::Open("/").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SafetensorsFileTest, DtypeTable) {
  EXPECT_EQ(SafetensorsDtypeName(SafetensorsDtype::kBF16), "BF16");
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kBF16), 2);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kF64), 8);
  EXPECT_EQ(SafetensorsDtypeSize(SafetensorsDtype::kF8E4M3), 1);
  EXPECT_TRUE(IsSupportedFloatDtype(SafetensorsDtype::kF16));
  EXPECT_FALSE(IsSupportedFloatDtype(SafetensorsDtype::kI32));
}

}  // namespace
}  // namespace pagellm
