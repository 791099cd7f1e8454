#include "worker/backend/forward_batch.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pagellm {

absl::Status ValidateForwardBatch(const ForwardBatch& b, const ForwardBatchLimits& l) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("malformed batch: ", parts...));
  };
  if (b.num_tokens <= 0 || b.num_tokens > l.max_batch_tokens) {
    return bad(b.num_tokens, " tokens (max ", l.max_batch_tokens, ")");
  }
  if (b.num_seqs <= 0 || b.num_seqs > b.num_tokens) {
    return bad(b.num_seqs, " sequences for ", b.num_tokens, " tokens");
  }
  if (b.token_ids == nullptr || b.positions == nullptr || b.token_seq == nullptr ||
      b.slots == nullptr || b.query_start == nullptr || b.seq_lens == nullptr ||
      b.block_tables == nullptr || (b.num_logits > 0 && b.logit_indices == nullptr)) {
    return bad("a null array");
  }
  if (l.block_size <= 0 || b.block_table_stride <= 0) {
    return bad("block table stride ", b.block_table_stride);
  }
  if (b.query_start[0] != 0 || b.query_start[b.num_seqs] != b.num_tokens) {
    return bad("query_start runs from ", b.query_start[0], " to ", b.query_start[b.num_seqs],
               " over ", b.num_tokens, " tokens");
  }
  for (int64_t s = 0; s < b.num_seqs; ++s) {
    const int64_t begin = b.query_start[s], end = b.query_start[s + 1];
    if (end <= begin) return bad("sequence row ", s, " has no tokens");
    const int64_t len = b.seq_lens[s];
    if (len < end - begin || len > l.max_position) {
      return bad("sequence row ", s, " has length ", len, " for ", end - begin, " new tokens");
    }
    const int64_t blocks = (len + l.block_size - 1) / l.block_size;
    if (blocks > b.block_table_stride) {
      return bad("sequence row ", s, " needs ", blocks, " blocks; the stride is ",
                 b.block_table_stride);
    }
    const int32_t* table = b.block_tables + s * b.block_table_stride;
    for (int64_t i = 0; i < blocks; ++i) {
      if (table[i] < 0 || table[i] >= l.num_kv_blocks) {
        return bad("sequence row ", s, " block ", i, " is ", table[i], " (pool of ",
                   l.num_kv_blocks, ")");
      }
    }
    for (int64_t t = begin; t < end; ++t) {
      const int64_t pos = len - (end - t);
      if (b.token_seq[t] != s || b.positions[t] != pos) {
        return bad("token ", t, " is (row ", b.token_seq[t], ", position ", b.positions[t],
                   "), expected (", s, ", ", pos, ")");
      }
      if (b.token_ids[t] < 0 || b.token_ids[t] >= l.vocab_size) {
        return bad("token ", t, " has id ", b.token_ids[t], " (vocabulary of ", l.vocab_size, ")");
      }
      const int64_t slot =
          static_cast<int64_t>(table[pos / l.block_size]) * l.block_size + pos % l.block_size;
      if (b.slots[t] != slot) {
        return bad("token ", t, " writes slot ", b.slots[t], "; its block table says ", slot);
      }
    }
  }
  if (b.num_logits < 0 || b.num_logits > b.num_tokens) return bad(b.num_logits, " logits rows");
  for (int64_t i = 0; i < b.num_logits; ++i) {
    const int32_t t = b.logit_indices[i];
    if (t < 0 || t >= b.num_tokens || (i > 0 && t <= b.logit_indices[i - 1])) {
      return bad("logit index ", i, " is ", t);
    }
  }
  for (int64_t s = 0; b.seq_adapter != nullptr && s < b.num_seqs; ++s) {
    if (b.seq_adapter[s] < -1 || b.seq_adapter[s] >= l.num_adapters) {
      return bad("sequence row ", s, " runs adapter ", b.seq_adapter[s], " (", l.num_adapters,
                 " served)");
    }
  }
  const bool one_each = b.num_tokens == b.num_seqs && b.num_logits == b.num_tokens;
  if (b.all_decode != one_each) {
    return bad("all_decode is ", b.all_decode, " for ", b.num_tokens, " tokens in ", b.num_seqs,
               " rows with ", b.num_logits, " logits");
  }
  return absl::OkStatus();
}

bool ValidateBatchesByDefault() {
#ifndef NDEBUG
  return true;
#else
  const char* v = std::getenv("PAGELLM_VALIDATE_BATCHES");
  return v != nullptr && std::strcmp(v, "1") == 0;
#endif
}

}  // namespace pagellm
