// Backend: the boundary between the engine (scheduling, requests, detokenization, stop strings)
// and the device that holds the weights and the paged KV pool. The engine speaks in token ids,
// positions, KV slots, block ids and sampling rows; a backend runs the model, samples where the
// logits are, and owns the pool's memory (device pool and swap pool alike). What a backend
// returns per step is token ids, the requested logprobs and beam candidates -- not logits.
//
// Implementations: cpu/ (the default), mock/ (no model, for the serving layers), testing/ (a
// scripted fake for tests), cuda/ (one GPU: kernels/cuda, cuBLAS, a device KV pool).
// factory/ builds one from options.
//
// Not thread-safe: the engine thread calls every method (health() excepted).
#ifndef PAGELLM_WORKER_BACKEND_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/backend/forward_batch.h"
#include "worker/backend/sampling_batch.h"
#include "worker/kv/kv_copy.h"
#include "worker/model/model_config.h"

namespace pagellm {

struct LoraAdapter;  // worker/model/lora_adapter.h

// Prompt positions one step scores for prompt logprobs, at most: each keeps a logits row of the
// vocabulary's width until it is scored. Backends with a fixed logits buffer size it for
// --max-num-seqs rows plus these.
inline constexpr int64_t kMaxScoredRowsPerStep = 256;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelConfig& config() const = 0;
  virtual std::string name() const = 0;
  [[nodiscard]] virtual int64_t block_size() const = 0;
  // Largest number of tokens one Forward() accepts.
  [[nodiscard]] virtual int64_t max_batch_tokens() const = 0;
  // Largest num_logits one Forward() accepts: the engine's sampled sequences (at most
  // --max-num-seqs) plus the prompt positions it scores for prompt logprobs.
  [[nodiscard]] virtual int64_t max_logits_rows() const { return max_batch_tokens(); }

  // Blocks in the device KV pool and in the swap pool. Block ids are [0, n); the engine's
  // BlockManager decides which block holds what.
  [[nodiscard]] virtual int64_t num_kv_blocks() const = 0;
  [[nodiscard]] virtual int64_t num_swap_blocks() const = 0;

  // The bounds ValidateForwardBatch checks this backend's batches against.
  [[nodiscard]] ForwardBatchLimits limits() const {
    return {max_batch_tokens(),
            num_kv_blocks(),
            block_size(),
            config().vocab_size,
            config().max_position_embeddings,
            static_cast<int64_t>(adapter_names().size())};
  }

  // The backend's LoRA adapter slots (worker/model/lora_adapter.h), in the order
  // ForwardBatch::seq_adapter indexes them: each entry the name of the adapter in that slot, ""
  // for an empty slot (a batch never names one). Empty for a backend without any.
  [[nodiscard]] virtual const std::vector<std::string>& adapter_names() const {
    static const std::vector<std::string> kNone;
    return kNone;
  }

  // Puts `adapter` (whole: a tensor-parallel rank takes its slice) in the empty slot `slot`, or,
  // with null, empties the slot. REQUIRES: no batch from now until the next change names a slot
  // being emptied (the engine retires an adapter only once no request uses it).
  // InvalidArgument when the adapter does not fit the model or the slot is not an empty one (or,
  // for null, a full one); Unimplemented where adapters cannot change while serving.
  virtual absl::Status SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) {
    return AdaptersFixed();
  }
  // Whether SetAdapter works here (false: Unimplemented).
  [[nodiscard]] virtual bool adapters_can_change() const { return false; }
  [[nodiscard]] absl::Status AdaptersFixed() const {
    return absl::UnimplementedError(
        absl::StrCat("the ", name(), " backend cannot load or unload LoRA adapters while serving"));
  }

  // Runs one step and samples it: out->rows gets one entry per sampling.rows entry, in order
  // (see sampling_batch.h). InvalidArgument for a malformed batch or sampling rows; a row that
  // cannot be sampled (NaN logits) fails alone, in its SampledRow::status. REQUIRES: the batch
  // meets forward_batch.h's contract; every KvCopy before it has been executed.
  virtual absl::Status Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                               SamplerOutput* out) = 0;

  // Runs one step and writes batch.num_logits rows of config().vocab_size floats to `logits`
  // (host memory). For reference comparisons and scoring, not the serving path: it moves the
  // whole vocabulary to the host. Errors as Forward.
  virtual absl::Status ForwardLogits(const ForwardBatch& batch, float* logits) = 0;

  // Runs one step for its KV writes and collectives only: a tensor-parallel follower's step,
  // whose logits the leader samples. Errors as Forward. The default runs ForwardLogits into a
  // buffer it drops; backends override it to skip the logits' copy.
  virtual absl::Status ForwardDiscardLogits(const ForwardBatch& batch) {
    std::vector<float> logits(static_cast<size_t>(batch.num_logits * config().vocab_size));
    return ForwardLogits(batch, logits.data());
  }

  // Writes the final hidden state -- the final norm's output, the LM head's input -- of logits
  // rows `rows` of the last step to `out` (host memory): config().hidden_size floats per row, in
  // the order given. What embedding requests return (SamplingParams::embed). The default is
  // Unimplemented. InvalidArgument for a row outside the last step's logits rows (none after a
  // failed step). REQUIRES: the last step ran through Forward() or ForwardLogits().
  virtual absl::Status FinalHidden(std::span<const int32_t> rows, float* out) {
    (void)rows;
    (void)out;
    return absl::UnimplementedError(
        absl::StrCat("the ", name(), " backend does not return hidden states (embeddings)"));
  }

  // Executes whole-block KV copies in order: copy-on-write inside the device pool, swap-out to
  // and swap-in from the swap pool. An error (a failed device copy) means the blocks involved
  // hold nothing usable. REQUIRES: ids in range (the block manager's output).
  virtual absl::Status CopyKv(std::span<const KvCopy> copies) = 0;

  // OK while the backend can run steps; otherwise the error that broke it for good (a
  // tensor-parallel group that lost a rank), so that a server stops taking requests. Unlike
  // every other method, thread-safe: health checks call it from other threads.
  [[nodiscard]] virtual absl::Status health() const { return absl::OkStatus(); }

  // Ranks of the tensor-parallel group this backend is (1: a single device), and the seconds
  // its steps have spent in collectives so far (0 for a single device).
  [[nodiscard]] virtual int tensor_parallel_size() const { return 1; }
  [[nodiscard]] virtual double collective_seconds() const { return 0; }
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_BACKEND_H_
