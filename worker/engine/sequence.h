// Sequence and SequenceGroup: the state of one request, owned by the engine thread (or by the
// simulator, which drives the same scheduler without a model).
//
// A request is a SequenceGroup. It starts with one sequence holding the prompt. When its prompt
// has been computed and the first token is sampled, a group with n > 1 parallel samples or a beam
// search forks into several sequences that share the prompt's KV blocks (copy-on-write).
//
// Sequence field validity:
//   seq_id         unique within the engine; the block manager's key. Stable for life.
//   tokens         prompt followed by every generated token (what the KV cache must hold);
//                  appended to by Scheduler::Update. The last token may not be in the block
//                  manager yet: the scheduler appends its slot at the start of the next step.
//   num_computed   tokens whose K/V are in the cache; reset to 0 by a recompute preemption. The
//                  next step computes tokens [num_computed, ...).
//   finished       no more tokens; its blocks are freed (it holds none).
//   stop, detok    null in the simulator.
//   grammar        set when the request constrains its output: where the output is in the
//                  grammar (after every token sampled so far).
//   draft          speculated next tokens (not in `tokens`): proposed by the engine before
//                  Schedule(), cut by the scheduler to what the step has room for, checked
//                  against the model in the step and cleared by Update(). Empty otherwise.
//   draft_acceptance  moving average of the share of its drafted tokens the model confirmed
//                  (Update() after each draft; 1 before any); the engine drafts only where it
//                  pays.
#ifndef PAGELLM_WORKER_ENGINE_SEQUENCE_H_
#define PAGELLM_WORKER_ENGINE_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/sampling/sampling_params.h"
#include "common/structured/grammar_matcher.h"
#include "common/tokenizer/streaming_detokenizer.h"
#include "worker/backend/sampling_rng.h"
#include "worker/engine/stop_checker.h"

namespace pagellm {

struct Sequence {
  int64_t seq_id = -1;
  int32_t sample_index = 0;  // parallel sample index; for beams, the final rank
  int64_t prompt_len = 0;
  std::vector<int32_t> tokens;
  int64_t num_computed = 0;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  SamplingRng rng{0};
  double cumulative_logprob = 0.0;  // sum of the raw logprobs of the sampled tokens (beams)
  std::unique_ptr<StopChecker> stop;
  std::unique_ptr<StreamingDetokenizer> detok;
  std::optional<structured::GrammarMatcher> grammar;
  std::vector<int32_t> draft;
  double draft_acceptance = 1.0;

  [[nodiscard]] int64_t num_output() const {
    return static_cast<int64_t>(tokens.size()) - prompt_len;
  }
  [[nodiscard]] int64_t num_uncomputed() const {
    return static_cast<int64_t>(tokens.size()) - num_computed;
  }
};

enum class GroupState { kWaiting, kRunning, kSwapped };

struct SequenceGroup {
  std::string request_id;
  // The engine's key for the group: request_id, or, when the request's n samples run as one group
  // each (Engine::AddRequest), request_id and the sample index.
  std::string key;
  int64_t arrival = 0;  // FCFS order: smaller arrived earlier
  SamplingParams params;
  // Built from params once, shared by every sequence's StopChecker (null in the simulator and
  // for beam search).
  std::shared_ptr<const StopConditions> stop_conditions;
  GroupState state = GroupState::kWaiting;
  // Sequences that will run once the group has forked (n, or the beam width); used against
  // --max-num-seqs at admission.
  int64_t max_seqs = 1;
  // The first token has been sampled (and the group has its max_seqs); set by Scheduler::Update.
  bool forked = false;
  // Live sequences (not finished), in sample order. The scheduler schedules them together.
  std::vector<std::unique_ptr<Sequence>> seqs;
  // Finished sequences, kept for the final output (beam hypotheses, finished samples).
  std::vector<std::unique_ptr<Sequence>> done;
  // With params.prompt_logprobs: the next prompt position whose logprob is due (from 1: position
  // 0 has none). The engine advances it as it reports them; a recompute preemption keeps it, so
  // recomputed positions are not reported twice.
  int64_t next_prompt_logprob = 1;
  // With params.allowed_token_ids: their mask over the vocabulary, made at admission; rows of
  // the group's sequences without a grammar point at it as is.
  std::vector<uint64_t> allowed_mask;
  // params.lora_adapter as the engine's adapter id (AdapterTable); -1: none.
  int32_t adapter = -1;
  // The adapter moves in and out of the backend's slots (loaded while serving): the scheduler
  // runs at most SchedulerOptions::lora_slots distinct such adapters at once. False for none,
  // or one fixed in its slot (--lora-modules).
  bool adapter_swaps = false;
  // Held by the engine outside the scheduler while its adapter's weights are read again
  // (Engine::AdapterRead).
  bool parked = false;
  // Set by the scheduler when the group is first passed over for want of an adapter slot: the
  // latest arrival then. Later groups of the running adapters do not pass it. -1: never.
  int64_t lora_pass_limit = -1;
  // The adapter's prefix-cache namespace (PrefixCacheNamespace of its name; 0: the base model)
  // salted with params.cache_salt (SaltedCacheNamespace), the same in every worker, so that the
  // router can predict hits.
  uint64_t cache_namespace = 0;

  // True while prompt logprobs are due: the prompt must be computed from position
  // next_prompt_logprob - 1 on, keeping those positions' logits, so no cached prefix is reused.
  // (Only before the group forks: its first token comes after the whole prompt.)
  [[nodiscard]] bool ScoresPrompt() const {
    return params.prompt_logprobs.has_value() && !forked && !seqs.empty() &&
           next_prompt_logprob < seqs.front()->prompt_len;
  }
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_SEQUENCE_H_
