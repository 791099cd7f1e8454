// ForwardBatch: one step's work for a model backend, as flat arrays (no padding). Prefill
// chunks and decode tokens of many sequences are mixed freely.
//
// The arrays are borrowed from the engine for the duration of Forward().
#ifndef PAGELLM_WORKER_BACKEND_FORWARD_BATCH_H_
#define PAGELLM_WORKER_BACKEND_FORWARD_BATCH_H_

#include <cstdint>

namespace pagellm {

struct ForwardBatch {
  int64_t num_tokens = 0;
  const int32_t* token_ids = nullptr;  // [num_tokens]
  const int32_t* positions = nullptr;  // [num_tokens] position within its sequence
  const int32_t* token_seq = nullptr;  // [num_tokens] row of block_tables
  const int64_t* slots = nullptr;      // [num_tokens] KV slot the token's K/V are written to
  int64_t num_seqs = 0;
  const int32_t* block_tables = nullptr;  // [num_seqs][max_blocks_per_seq] physical block ids
  int64_t max_blocks_per_seq = 0;
  // Tokens whose next-token logits are wanted (usually each sequence's last token), in the
  // order the logits rows are written.
  int64_t num_logits = 0;
  const int32_t* logit_indices = nullptr;  // [num_logits] indices into the token arrays
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_FORWARD_BATCH_H_
