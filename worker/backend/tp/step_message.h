// StepMessage: what rank 0 of a tensor-parallel group sends its followers before each backend
// call, so that every rank runs the same step: a forward batch, a list of KV copies, a heartbeat
// (the group is idle but alive), a LoRA adapter slot's change (each rank loads the adapter from
// its path: the whole adapter, sliced where it lands) or the order to stop.
//
// The encoding is flat little-endian binary in one buffer. A block table row is sent only up to
// the blocks its sequence uses (the rest are never read, forward_batch.h), so a decode step of 64
// sequences is a few KB, not num_seqs x the full stride. Decode() checks every count against the
// follower's limits before it sizes anything, so a corrupt message cannot make a follower
// allocate without bound; the batch itself is then checked by the backend as any batch is.
//
// StepMessage owns the arrays a decoded batch points into and reuses them: decoding the steps of
// a steady workload allocates nothing. Not thread-safe.
#ifndef PAGELLM_WORKER_BACKEND_TP_STEP_MESSAGE_H_
#define PAGELLM_WORKER_BACKEND_TP_STEP_MESSAGE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/backend/forward_batch.h"
#include "worker/kv/kv_copy.h"

namespace pagellm {

enum class StepKind : uint8_t {
  kForward = 1,  // run the batch (the leader also samples it)
  kLogits = 2,   // run the batch for its logits (ForwardLogits)
  kCopyKv = 3,   // execute the KV copies
  kHeartbeat = 4,
  kStop = 5,
  kSetAdapter = 6,  // put an adapter (by name and path) in a slot, or empty it
};

// The most bytes of an adapter's name and path in a kSetAdapter step.
inline constexpr int64_t kMaxAdapterNameBytes = 128;
inline constexpr int64_t kMaxAdapterPathBytes = 4096;
// The most adapter names a kSetAdapter step tells the followers to forget.
inline constexpr int64_t kMaxForgottenAdapters = 4096;

// Appends the encoding of a step to *out (cleared first). `block_size` decides how much of each
// block table row is sent. REQUIRES: batch meets forward_batch.h's contract.
void EncodeForwardStep(StepKind kind, const ForwardBatch& batch, int64_t block_size,
                       std::string* out);
void EncodeCopyStep(std::span<const KvCopy> copies, std::string* out);
void EncodeControlStep(StepKind kind, std::string* out);  // kHeartbeat or kStop
// An adapter `name` read from `path` into `slot` (`fresh`: read it again, else the copy a
// follower holds under that name will do); empty name and path: empty the slot. `forgotten`:
// names whose copies the followers may drop (at most kMaxForgottenAdapters).
void EncodeAdapterStep(int32_t slot, std::string_view name, std::string_view path, bool fresh,
                       std::span<const std::string> forgotten, std::string* out);

class StepMessage {
 public:
  // Decodes `bytes`. InvalidArgument for a truncated or malformed message, or counts beyond
  // `limits` (tokens, blocks per row from the context length, vocabulary is not checked here).
  absl::Status Decode(std::string_view bytes, const ForwardBatchLimits& limits, int64_t max_copies);

  [[nodiscard]] StepKind kind() const { return kind_; }
  // Valid after decoding a kForward or kLogits step, until the next Decode.
  [[nodiscard]] const ForwardBatch& batch() const { return batch_; }
  // Valid after decoding a kCopyKv step, until the next Decode.
  [[nodiscard]] std::span<const KvCopy> copies() const { return copies_; }
  // Valid after decoding a kSetAdapter step: the slot, and the adapter's name and path (both
  // empty: empty the slot). The slot is not checked against the backend here.
  [[nodiscard]] int32_t adapter_slot() const { return adapter_slot_; }
  [[nodiscard]] const std::string& adapter_name() const { return adapter_name_; }
  [[nodiscard]] const std::string& adapter_path() const { return adapter_path_; }
  // The adapter is new to the group (its first slot): read it, not a copy held under its name.
  [[nodiscard]] bool adapter_fresh() const { return adapter_fresh_; }
  // Names of adapters the leader no longer holds.
  [[nodiscard]] const std::vector<std::string>& forgotten_adapters() const {
    return forgotten_adapters_;
  }

 private:
  StepKind kind_ = StepKind::kHeartbeat;
  ForwardBatch batch_;
  std::vector<int32_t> token_ids_, positions_, token_seq_, query_start_, seq_lens_;
  std::vector<int32_t> block_tables_, logit_indices_, seq_adapter_;
  std::vector<int64_t> slots_;
  std::vector<KvCopy> copies_;
  int32_t adapter_slot_ = -1;
  bool adapter_fresh_ = false;
  std::string adapter_name_, adapter_path_;
  std::vector<std::string> forgotten_adapters_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_TP_STEP_MESSAGE_H_
