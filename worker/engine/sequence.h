// Sequence: the state of one generated sequence, owned by the engine thread.
//
// Field validity:
//   tokens          prompt followed by every generated token (what the KV cache must hold).
//   num_computed    tokens whose K/V are in the cache; 0 while waiting or after a recompute
//                   preemption. The next step computes tokens [num_computed, ...).
//   block_table     physical KV block ids, one per block_size tokens; empty while waiting.
#ifndef PAGELLM_WORKER_ENGINE_SEQUENCE_H_
#define PAGELLM_WORKER_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/tokenizer/streaming_detokenizer.h"
#include "worker/engine/sampler.h"
#include "worker/engine/sampling_params.h"
#include "worker/engine/stop_checker.h"

namespace pagellm {

enum class SequenceState { kWaiting, kRunning, kFinished };

struct Sequence {
  std::string request_id;
  int64_t arrival = 0;  // FCFS order: smaller arrived earlier
  SamplingParams params;
  SamplingRng rng{0};
  int64_t prompt_len = 0;
  std::vector<int32_t> tokens;
  int64_t num_computed = 0;
  std::vector<int32_t> block_table;
  SequenceState state = SequenceState::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  std::unique_ptr<StopChecker> stop;
  std::unique_ptr<StreamingDetokenizer> detok;

  [[nodiscard]] int64_t num_output() const {
    return static_cast<int64_t>(tokens.size()) - prompt_len;
  }
  [[nodiscard]] int64_t num_uncomputed() const {
    return static_cast<int64_t>(tokens.size()) - num_computed;
  }
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_SEQUENCE_H_
