// StepArrays: the owned arrays behind a ForwardBatch, for code that builds steps itself rather
// than through the scheduler -- the CUDA backend's profiling step, the GPU tools, tests. Rows are
// appended one at a time; each row's tokens continue a sequence whose blocks the caller chose.
//
// Not thread-safe.
#ifndef PAGELLM_WORKER_BACKEND_STEP_ARRAYS_H_
#define PAGELLM_WORKER_BACKEND_STEP_ARRAYS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "worker/backend/forward_batch.h"

namespace pagellm {

class StepArrays {
 public:
  StepArrays(int64_t block_size, int64_t block_table_stride)
      : block_size_(block_size), stride_(block_table_stride) {}

  // Appends a row: `tokens` at positions cached, cached + 1, ... of a sequence held in `blocks`
  // (block ids covering cached + tokens.size() positions). Logits are wanted for the row's last
  // token, or, with logits_from >= 0, for every token at a position >= logits_from. The row
  // runs LoRA adapter `adapter` (-1: the base model).
  // REQUIRES: blocks.size() <= block_table_stride and covers the positions.
  void AddRow(std::span<const int32_t> tokens, int64_t cached, std::span<const int32_t> blocks,
              int64_t logits_from = -1, int32_t adapter = -1);
  void Clear();

  // The step so far; valid until the next AddRow or Clear.
  [[nodiscard]] ForwardBatch batch() const;

 private:
  int64_t block_size_, stride_;
  std::vector<int32_t> ids_, pos_, seq_, query_start_{0}, seq_lens_, tables_, logits_, adapters_;
  bool any_adapter_ = false;
  std::vector<int64_t> slots_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_STEP_ARRAYS_H_
