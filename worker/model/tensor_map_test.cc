#include "worker/model/tensor_map.h"

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Bytes 0, 1, 2, ... so that a view's position in its parent is visible in its first byte.
std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), uint8_t{0});
  return v;
}

TEST(TensorMapTest, HoldsViewsAndOwnedTensorsByName) {
  TensorMap map;
  const std::vector<uint8_t> file = Iota(24);
  ASSERT_TRUE(map.Add("a", {.dtype = GgmlType::kF32, .shape = {2, 3}, .data = file.data()}).ok());
  ASSERT_TRUE(map.AddOwned("b", GgmlType::kBF16, {4}, Iota(8)).ok());
  EXPECT_EQ(map.size(), 2u);
  EXPECT_THAT(map.Names(), ElementsAre("a", "b"));
  EXPECT_EQ(map.total_bytes(), 24 + 8);
  const TensorView* a = map.Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->row_stride_bytes, 12);  // filled in: contiguous
  EXPECT_TRUE(a->contiguous());
  EXPECT_EQ(a->num_rows(), 2);
  EXPECT_EQ(a->row(1)[0], 12);
  EXPECT_EQ(map.Find("b")->data[7], 7);

  // Moving the map keeps the owned bytes where they are.
  const uint8_t* owned = map.Find("b")->data;
  TensorMap moved = std::move(map);
  EXPECT_EQ(moved.Find("b")->data, owned);
}

TEST(TensorMapTest, RefusesMalformedTensors) {
  TensorMap map;
  const std::vector<uint8_t> bytes = Iota(64);
  EXPECT_EQ(map.Get("nope").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(map.Get("nope").status().message()), HasSubstr("missing tensor nope"));
  ASSERT_TRUE(map.Add("x", {.dtype = GgmlType::kF32, .shape = {4}, .data = bytes.data()}).ok());
  EXPECT_EQ(map.Add("x", {.dtype = GgmlType::kF32, .shape = {4}, .data = bytes.data()}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(map.Add("", {.dtype = GgmlType::kF32, .shape = {4}, .data = bytes.data()}).ok());
  EXPECT_FALSE(map.Add("z", {.dtype = GgmlType::kF32, .shape = {0, 4}, .data = bytes.data()}).ok());
  EXPECT_FALSE(map.Add("z", {.dtype = GgmlType::kF32, .shape = {4}, .data = nullptr}).ok());
  EXPECT_FALSE(
      map.Add("z", {.dtype = static_cast<GgmlType>(99), .shape = {4}, .data = bytes.data()}).ok());
  // Q8_0 rows are whole blocks of 32.
  EXPECT_FALSE(
      map.Add("z", {.dtype = GgmlType::kQ8_0, .shape = {2, 16}, .data = bytes.data()}).ok());
  EXPECT_FALSE(map.AddOwned("z", GgmlType::kF16, {4}, Iota(7)).ok());  // 4 halves are 8 bytes
}

TEST(TensorMapTest, RowShardsAreContiguousSlices) {
  const std::vector<uint8_t> bytes = Iota(4 * 6 * 4);
  const TensorView t{
      .dtype = GgmlType::kF32, .shape = {4, 6}, .data = bytes.data(), .row_stride_bytes = 24};
  absl::StatusOr<TensorView> s = ShardOf(t, {.rank = 1, .world_size = 2}, ShardDim::kRows);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->shape, ElementsAre(2, 6));
  EXPECT_EQ(s->data, bytes.data() + 2 * 24);
  EXPECT_TRUE(s->contiguous());
  // A bias splits like its matrix's rows.
  const TensorView bias{
      .dtype = GgmlType::kF32, .shape = {4}, .data = bytes.data(), .row_stride_bytes = 16};
  s = ShardOf(bias, {.rank = 1, .world_size = 2}, ShardDim::kRows);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->shape, ElementsAre(2));
  EXPECT_EQ(s->data, bytes.data() + 8);
}

TEST(TensorMapTest, ColumnShardsAreStridedViews) {
  const std::vector<uint8_t> bytes = Iota(4 * 6 * 2);
  const TensorView t{
      .dtype = GgmlType::kBF16, .shape = {4, 6}, .data = bytes.data(), .row_stride_bytes = 12};
  absl::StatusOr<TensorView> s = ShardOf(t, {.rank = 2, .world_size = 3}, ShardDim::kColumns);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->shape, ElementsAre(4, 2));
  EXPECT_EQ(s->row_stride_bytes, 12);
  EXPECT_FALSE(s->contiguous());
  EXPECT_EQ(s->row(0)[0], 8);       // columns 4..5 of row 0 start at byte 8
  EXPECT_EQ(s->row(3)[0], 36 + 8);  // and of row 3
}

TEST(TensorMapTest, QuantizedColumnShardsKeepWholeBlocks) {
  // Q8_0: 34-byte blocks of 32 elements; a row of 64 is two blocks.
  const std::vector<uint8_t> bytes = Iota(2 * 68);
  const TensorView t{
      .dtype = GgmlType::kQ8_0, .shape = {2, 64}, .data = bytes.data(), .row_stride_bytes = 68};
  absl::StatusOr<TensorView> s = ShardOf(t, {.rank = 1, .world_size = 2}, ShardDim::kColumns);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->data, bytes.data() + 34);
  EXPECT_EQ(s->row_bytes(), 34);
  // Four ranks would cut blocks in half.
  EXPECT_EQ(ShardOf(t, {.rank = 0, .world_size = 4}, ShardDim::kColumns).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorMapTest, ShardSpecsMustExistAndDivide) {
  const std::vector<uint8_t> bytes = Iota(3 * 4 * 4);
  const TensorView t{
      .dtype = GgmlType::kF32, .shape = {3, 4}, .data = bytes.data(), .row_stride_bytes = 16};
  EXPECT_FALSE(ShardOf(t, {.rank = 2, .world_size = 2}, ShardDim::kRows).ok());
  EXPECT_FALSE(ShardOf(t, {.rank = 0, .world_size = 0}, ShardDim::kRows).ok());
  EXPECT_FALSE(ShardOf(t, {.rank = 0, .world_size = 2}, ShardDim::kRows).ok());  // 3 rows
  EXPECT_TRUE(ShardOf(t, {.rank = 1, .world_size = 2}, ShardDim::kColumns).ok());
  absl::StatusOr<TensorView> same = ShardOf(t, {.rank = 1, .world_size = 2}, ShardDim::kReplicated);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->data, t.data);
}

}  // namespace
}  // namespace pagellm
