#include "worker/backend/tp/step_message.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/step_arrays.h"

namespace pagellm {
namespace {

// Two sequences, block size 4, stride 8: a 5-token prefill chunk at positions 3..7 of sequence 0
// (blocks 7, 2) and one decode token at position 9 of sequence 1 (blocks 1, 0, 5).
struct Batch {
  StepArrays arrays{4, 8};
  Batch() {
    arrays.AddRow(std::vector<int32_t>{10, 11, 12, 13, 14}, 3, std::vector<int32_t>{7, 2});
    arrays.AddRow(std::vector<int32_t>{20}, 9, std::vector<int32_t>{1, 0, 5});
  }
  ForwardBatch b() const { return arrays.batch(); }
  std::vector<int32_t> ids = {10, 11, 12, 13, 14, 20}, pos = {3, 4, 5, 6, 7, 9},
                       seq = {0, 0, 0, 0, 0, 1}, qs = {0, 5, 6}, lens = {8, 10},
                       tables = {7, 2, 0, 0, 0, 0, 0, 0, 1, 0, 5, 0, 0, 0, 0, 0}, logits = {4, 5};
  std::vector<int64_t> slots = {7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 2 * 4 + 2, 2 * 4 + 3, 5 * 4 + 1};
};

ForwardBatchLimits Limits() {
  return {.max_batch_tokens = 16,
          .num_kv_blocks = 8,
          .block_size = 4,
          .vocab_size = 64,
          .max_position = 32};
}

template <typename T>
std::vector<T> V(const T* p, int64_t n) {
  return std::vector<T>(p, p + n);
}

TEST(StepMessageTest, AForwardBatchRoundTrips) {
  const Batch in;
  std::string bytes;
  EncodeForwardStep(StepKind::kLogits, in.b(), 4, &bytes);
  StepMessage m;
  ASSERT_TRUE(m.Decode(bytes, Limits(), 16).ok());
  ASSERT_EQ(m.kind(), StepKind::kLogits);
  const ForwardBatch& b = m.batch();
  ASSERT_EQ(b.num_tokens, 6);
  EXPECT_EQ(V(b.token_ids, 6), in.ids);
  EXPECT_EQ(V(b.positions, 6), in.pos);
  EXPECT_EQ(V(b.token_seq, 6), in.seq);
  EXPECT_EQ(V(b.slots, 6), in.slots);
  EXPECT_EQ(V(b.query_start, 3), in.qs);
  EXPECT_EQ(V(b.seq_lens, 2), in.lens);
  EXPECT_EQ(V(b.block_tables, 16), in.tables);
  EXPECT_EQ(V(b.logit_indices, 2), in.logits);
  EXPECT_EQ(b.block_table_stride, 8);
  EXPECT_FALSE(b.all_decode);
  EXPECT_TRUE(ValidateForwardBatch(b, Limits()).ok());
  EXPECT_EQ(b.seq_adapter, nullptr);
}

TEST(StepMessageTest, RowsAdaptersTravelWhenAnyRowHasOne) {
  StepArrays arrays(4, 8);
  arrays.AddRow(std::vector<int32_t>{10, 11}, 0, std::vector<int32_t>{7}, -1, /*adapter=*/-1);
  arrays.AddRow(std::vector<int32_t>{20}, 9, std::vector<int32_t>{1, 0, 5}, -1, /*adapter=*/1);
  std::string bytes;
  EncodeForwardStep(StepKind::kForward, arrays.batch(), 4, &bytes);
  StepMessage m;
  ForwardBatchLimits limits = Limits();
  limits.num_adapters = 2;
  ASSERT_TRUE(m.Decode(bytes, limits, 16).ok());
  ASSERT_NE(m.batch().seq_adapter, nullptr);
  EXPECT_EQ(V(m.batch().seq_adapter, 2), (std::vector<int32_t>{-1, 1}));
  EXPECT_TRUE(ValidateForwardBatch(m.batch(), limits).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(m.Decode(bytes.substr(0, n), limits, 16).ok()) << n;
  }
}

TEST(StepMessageTest, OnlyTheUsedPartOfEachBlockTableRowIsSent) {
  const Batch in;
  std::string bytes;
  EncodeForwardStep(StepKind::kForward, in.b(), 4, &bytes);
  const size_t used = bytes.size();
  std::vector<int32_t> tables = in.tables;  // what lies past the used blocks is not sent...
  for (int i : {2, 3, 7, 11, 15}) tables[i] = 3;
  ForwardBatch garbage = in.b();
  garbage.block_tables = tables.data();
  EncodeForwardStep(StepKind::kForward, garbage, 4, &bytes);
  EXPECT_EQ(bytes.size(), used);
  StepMessage m;
  ASSERT_TRUE(m.Decode(bytes, Limits(), 16).ok());
  EXPECT_EQ(V(m.batch().block_tables, 16), in.tables);  // ...and arrives as 0
}

TEST(StepMessageTest, CopiesAndControlStepsRoundTrip) {
  const std::vector<KvCopy> copies = {{KvCopy::Kind::kDeviceToDevice, 1, 2},
                                      {KvCopy::Kind::kDeviceToSwap, 3, 0},
                                      {KvCopy::Kind::kSwapToDevice, 0, 4}};
  std::string bytes;
  EncodeCopyStep(copies, &bytes);
  StepMessage m;
  ASSERT_TRUE(m.Decode(bytes, Limits(), 16).ok());
  ASSERT_EQ(m.kind(), StepKind::kCopyKv);
  EXPECT_EQ(std::vector<KvCopy>(m.copies().begin(), m.copies().end()), copies);
  EncodeControlStep(StepKind::kStop, &bytes);
  ASSERT_TRUE(m.Decode(bytes, Limits(), 16).ok());
  EXPECT_EQ(m.kind(), StepKind::kStop);
}

TEST(StepMessageTest, AdapterStepsRoundTripAndRefuseOversizedNames) {
  std::string bytes;
  StepMessage m;
  const std::vector<std::string> forgotten = {"old-a", "old-b"};
  EncodeAdapterStep(1, "sql-lora", "/adapters/sql", /*fresh=*/true, forgotten, &bytes);
  ASSERT_TRUE(m.Decode(bytes, Limits(), 16).ok());
  ASSERT_EQ(m.kind(), StepKind::kSetAdapter);
  EXPECT_EQ(m.adapter_slot(), 1);
  EXPECT_EQ(m.adapter_name(), "sql-lora");
  EXPECT_EQ(m.adapter_path(), "/adapters/sql");
  EXPECT_TRUE(m.adapter_fresh());
  EXPECT_EQ(m.forgotten_adapters(), forgotten);
  EncodeAdapterStep(0, "", "", /*fresh=*/false, {}, &bytes);  // empty the slot
  ASSERT_TRUE(m.Decode(bytes, Limits(), 16).ok());
  EXPECT_EQ(m.adapter_slot(), 0);
  EXPECT_TRUE(m.adapter_name().empty());
  EXPECT_FALSE(m.adapter_fresh());
  EXPECT_TRUE(m.forgotten_adapters().empty());
  EncodeAdapterStep(0, std::string(kMaxAdapterNameBytes + 1, 'x'), "/a", true, {}, &bytes);
  EXPECT_EQ(m.Decode(bytes, Limits(), 16).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> long_name = {std::string(kMaxAdapterNameBytes + 1, 'x')};
  EncodeAdapterStep(0, "x", "/a", true, long_name, &bytes);
  EXPECT_EQ(m.Decode(bytes, Limits(), 16).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> too_many(kMaxForgottenAdapters + 1, "x");
  EncodeAdapterStep(0, "x", "/a", true, too_many, &bytes);
  EXPECT_EQ(m.Decode(bytes, Limits(), 16).code(), absl::StatusCode::kInvalidArgument);
  EncodeAdapterStep(0, "x", "/a", false, forgotten, &bytes);
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(m.Decode(std::string_view(bytes).substr(0, cut), Limits(), 16).ok()) << cut;
  }
  EXPECT_FALSE(m.Decode(bytes + "z", Limits(), 16).ok());
}

TEST(StepMessageTest, MalformedOrOversizedMessagesAreRefused) {
  const Batch in;
  std::string good;
  EncodeForwardStep(StepKind::kForward, in.b(), 4, &good);
  StepMessage m;
  // Every truncation, and a trailing byte.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(m.Decode(good.substr(0, n), Limits(), 16).ok()) << n;
  }
  EXPECT_FALSE(m.Decode(good + "x", Limits(), 16).ok());
  // More tokens than a step may hold, another block size, an unknown kind.
  ForwardBatchLimits small = Limits();
  small.max_batch_tokens = 5;
  EXPECT_FALSE(m.Decode(good, small, 16).ok());
  ForwardBatchLimits other = Limits();
  other.block_size = 8;
  EXPECT_FALSE(m.Decode(good, other, 16).ok());
  EXPECT_FALSE(m.Decode(std::string(1, '\x09'), Limits(), 16).ok());
  // More copies than the pools can need.
  std::string copies;
  EncodeCopyStep(std::vector<KvCopy>(17), &copies);
  EXPECT_FALSE(m.Decode(copies, Limits(), 16).ok());
}

}  // namespace
}  // namespace pagellm
