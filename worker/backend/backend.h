// Backend: the boundary between the engine (scheduling, sampling, requests) and the device that
// holds the weights and the paged KV pool. The engine speaks only in token ids, positions, KV
// slots and block ids; a backend runs the model and owns the pool's memory. The CPU backend is
// the default; a CUDA backend implements the same interface.
//
// Not thread-safe: the engine thread calls every method.
#ifndef PAGELLM_WORKER_BACKEND_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_BACKEND_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "worker/backend/forward_batch.h"
#include "worker/kv/kv_copy.h"
#include "worker/model/model_config.h"

namespace pagellm {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelConfig& config() const = 0;
  virtual std::string name() const = 0;
  [[nodiscard]] virtual int64_t block_size() const = 0;
  // Largest number of tokens one Forward() accepts.
  [[nodiscard]] virtual int64_t max_batch_tokens() const = 0;

  // Blocks in the device KV pool and in the host swap pool. Block ids are [0, n); the engine's
  // BlockManager decides which block holds what.
  [[nodiscard]] virtual int64_t num_kv_blocks() const = 0;
  [[nodiscard]] virtual int64_t num_swap_blocks() const = 0;

  // Runs one step; writes batch.num_logits rows of config().vocab_size floats to `logits`
  // (host memory). InvalidArgument for a malformed batch.
  virtual absl::Status Forward(const ForwardBatch& batch, float* logits) = 0;

  // Executes whole-block KV copies in order, before the next Forward(): copy-on-write inside the
  // device pool, swap-out to and swap-in from the host pool. REQUIRES: ids in range (the block
  // manager's output).
  virtual void CopyKv(std::span<const KvCopy> copies) = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_BACKEND_H_
