// Engine: turns requests (prompt token ids + sampling parameters) into streamed tokens and
// text, stepping a Backend under the FCFS Scheduler.
//
// Usage: AddRequest() any number of times, then call Step() until HasUnfinished() is false;
// each Step() appends the new tokens/text of every sequence that advanced. Abort() removes a
// request in any state and frees its blocks.
//
// Not thread-safe: one engine thread owns it (the worker hands requests over through a queue).
#ifndef PAGELLM_WORKER_ENGINE_ENGINE_H_
#define PAGELLM_WORKER_ENGINE_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/backend/backend.h"
#include "worker/engine/sampler.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/sequence.h"

namespace pagellm {

struct EngineOptions {
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  int64_t max_model_len = 0;  // 0: the model's context length
};

// What one sequence produced in one step.
struct SequenceOutput {
  std::string request_id;
  std::vector<int32_t> new_token_ids;
  std::string text;  // newly released text (stop strings held back / removed)
  std::vector<SampleResult> logprobs;  // one per new token when logprobs were requested
  FinishReason finish_reason = FinishReason::kNone;
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct EngineStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t computed_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t peak_used_blocks = 0;
};

class Engine {
 public:
  // `backend` and `tokenizer` are borrowed and must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(Backend* backend,
                                                        const Tokenizer* tokenizer,
                                                        const EngineOptions& options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. InvalidArgument for an empty prompt, ids outside the
  // vocabulary, bad sampling parameters, or prompt + max_tokens beyond max_model_len (the
  // message names both numbers); AlreadyExists for a duplicate id; ResourceExhausted when the
  // sequence could never fit in the KV pool.
  absl::Status AddRequest(const std::string& request_id, std::vector<int32_t> prompt_ids,
                          const SamplingParams& params);
  // Removes the request wherever it is and frees its blocks. NotFound if unknown or finished.
  absl::Status Abort(const std::string& request_id);

  // Runs one iteration; appends outputs to `outputs` (not cleared). An error from the backend
  // is returned and fails the step's sequences; the engine stays usable.
  absl::Status Step(std::vector<SequenceOutput>* outputs);

  [[nodiscard]] bool HasUnfinished() const { return !sequences_.empty(); }
  [[nodiscard]] const EngineStats& stats() const { return stats_; }
  [[nodiscard]] int64_t num_waiting() const { return scheduler_->num_waiting(); }
  [[nodiscard]] int64_t num_running() const { return scheduler_->num_running(); }
  [[nodiscard]] int64_t max_model_len() const { return max_model_len_; }

 private:
  Engine() = default;
  void Finish(Sequence* seq);

  Backend* backend_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  EngineOptions options_;
  int64_t max_model_len_ = 0;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Sampler> sampler_;
  absl::flat_hash_map<std::string, std::unique_ptr<Sequence>> sequences_;
  int64_t next_arrival_ = 0;
  EngineStats stats_;
  // Per-step buffers, reused.
  std::vector<int32_t> token_ids_, positions_, token_seq_, block_tables_, logit_indices_;
  std::vector<int64_t> slots_;
  std::vector<float> logits_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_ENGINE_H_
