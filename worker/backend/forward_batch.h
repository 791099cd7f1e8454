// ForwardBatch: one step's work for a backend, as flat arrays (no padding between tokens).
// Prefill chunks and decode tokens of many sequences mix freely. The layout is fixed so that a
// GPU backend can capture it in a graph: the block table has the same row stride every step,
// and an all-decode step says so.
//
// Sequence row s covers tokens [query_start[s], query_start[s + 1]): consecutive positions
// seq_lens[s] - n ... seq_lens[s] - 1 of that sequence, where n is the row's token count. Its
// K/V for positions 0 ... seq_lens[s] - 1 are in the blocks block_tables[s][0 ... ] -- earlier
// positions were written by earlier steps, this step's by this step, before attention reads
// them.
//
// REQUIRES (what every backend may assume and ValidateForwardBatch checks):
//   - 0 < num_tokens <= the backend's max_batch_tokens; 0 < num_seqs <= num_tokens;
//   - query_start[0] == 0, query_start[num_seqs] == num_tokens, strictly increasing;
//   - token t of row s: token_seq[t] == s, positions[t] == seq_lens[s] - (query_start[s + 1] - t),
//     0 <= token_ids[t] < vocab_size, positions[t] < the model's context length;
//   - the first ceil(seq_lens[s] / block_size) entries of row s of block_tables are block ids
//     in [0, num_kv_blocks); entries past them are never read (0 by convention);
//   - slots[t] == block_tables[s][positions[t] / block_size] * block_size +
//     positions[t] % block_size (so in [0, num_kv_blocks * block_size));
//   - logit_indices strictly increasing, in [0, num_tokens);
//   - all_decode == (every row has exactly one token, and each token's logits are wanted);
//   - seq_adapter null, or each entry -1 or an adapter index in [0, the backend's adapters).
// A slot or block id outside the pool would be a memory fault on a GPU (a sticky illegal-address
// error), so backends run the validator in debug builds and in tests.
//
// The arrays are borrowed from the engine for the duration of the call.
#ifndef PAGELLM_WORKER_BACKEND_FORWARD_BATCH_H_
#define PAGELLM_WORKER_BACKEND_FORWARD_BATCH_H_

#include <cstdint>

#include "absl/status/status.h"

namespace pagellm {

struct ForwardBatch {
  int64_t num_tokens = 0;
  const int32_t* token_ids = nullptr;  // [num_tokens]
  const int32_t* positions = nullptr;  // [num_tokens] position within its sequence
  const int32_t* token_seq = nullptr;  // [num_tokens] sequence row
  const int64_t* slots = nullptr;      // [num_tokens] KV slot the token's K/V are written to

  int64_t num_seqs = 0;
  const int32_t* query_start = nullptr;  // [num_seqs + 1] first token of each row
  const int32_t* seq_lens = nullptr;     // [num_seqs] tokens in the cache after this step
  // [num_seqs][block_table_stride] physical block ids. The stride is the same every step:
  // ceil(max_model_len / block_size).
  const int32_t* block_tables = nullptr;
  int64_t block_table_stride = 0;

  // Tokens whose next-token logits are wanted (each sampled sequence's last token), in the
  // order of the logits rows.
  int64_t num_logits = 0;
  const int32_t* logit_indices = nullptr;  // [num_logits] indices into the token arrays

  // Every row is one decode token whose logits are wanted (num_tokens == num_seqs ==
  // num_logits): the shape a GPU backend replays from a captured graph.
  bool all_decode = false;

  // [num_seqs] the LoRA adapter each row runs with: -1 for the base model alone, else an index
  // into the backend's adapter_names(). Null: every row runs the base model.
  const int32_t* seq_adapter = nullptr;
};

// What the backend can hold; the bounds ValidateForwardBatch checks against.
struct ForwardBatchLimits {
  int64_t max_batch_tokens = 0;
  int64_t num_kv_blocks = 0;
  int64_t block_size = 0;
  int64_t vocab_size = 0;
  int64_t max_position = 0;  // the model's context length
  int64_t num_adapters = 0;  // LoRA adapters the backend serves
};

// OK when `batch` meets every REQUIRES above; InvalidArgument naming the first violation
// otherwise. O(num_tokens + num_seqs * blocks per sequence): for debug builds and tests.
absl::Status ValidateForwardBatch(const ForwardBatch& batch, const ForwardBatchLimits& limits);

// True in debug builds (!NDEBUG) or when PAGELLM_VALIDATE_BATCHES=1: backends then validate
// every batch before running it.
bool ValidateBatchesByDefault();

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_FORWARD_BATCH_H_
