// Engine: turns requests (prompt token ids + sampling parameters) into streamed tokens and
// text, stepping a Backend under the FCFS Scheduler and the paged BlockManager.
//
// Usage: AddRequest() any number of times, then call Step() until HasUnfinished() is false;
// each Step() appends the new tokens/text of every sequence that advanced. Abort() removes a
// request in any state (waiting, mid-prefill, running, swapped) and frees its blocks.
//
// A request with n > 1 streams n samples (SequenceOutput::sample_index); a beam search returns
// its beams, best first, in the step that finishes it.
//
// Not thread-safe: one engine thread owns it (the worker hands requests over through a queue).
#ifndef PAGELLM_WORKER_ENGINE_ENGINE_H_
#define PAGELLM_WORKER_ENGINE_ENGINE_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/backend/backend.h"
#include "worker/backend/sampling_batch.h"
#include "worker/engine/adapter_table.h"
#include "worker/engine/beam_search.h"
#include "worker/engine/ngram_proposer.h"
#include "worker/engine/resumed_output.h"
#include "worker/engine/scheduler.h"
#include "worker/engine/sequence.h"
#include "worker/engine/step_cost_model.h"
#include "worker/engine/structured_outputs.h"
#include "worker/kv/block_manager.h"
#include "worker/model/lora_adapter.h"

namespace pagellm {

struct EngineOptions {
  int64_t max_num_batched_tokens = 2048;
  // See SchedulerOptions::long_prefill_token_threshold (0: no cap).
  int64_t long_prefill_token_threshold = 0;
  int64_t max_num_seqs = 256;
  // Context limit. 0: the model's context length, lowered (with a warning) to what the KV pool
  // holds for one sequence; Create refuses an explicit value above either.
  int64_t max_model_len = 0;
  PreemptionMode preemption_mode = PreemptionMode::kAuto;
  // fcfs, or priority (SamplingParams::priority; see Scheduler). Under fcfs a request with a
  // nonzero priority is refused (InvalidArgument), as vLLM refuses it.
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  bool enable_prefix_caching = true;
  double watermark = 0.01;  // fraction of the KV pool kept free when admitting
  // Measure kv_live_token_ratio every step (walks every block table: for --stats, not serving).
  bool collect_kv_stats = false;
  // N-gram speculation (off unless num_speculative_tokens > 0): decodes guess their next tokens
  // from their context and the model checks the guesses in the same step, where the guesses of
  // that sequence are confirmed often enough to pay at the step's size (the step's measured
  // cost). A sequence's tokens are the same with it or without (rows sample exactly as the
  // steps they stand for would).
  // Not for beam search; a structured output's drafts stop where its grammar refuses them.
  NgramOptions speculative = {};
  // LoRA adapters held in host memory (vLLM's --max-cpu-loras): those loaded while serving
  // (LoadAdapter) move into the backend's slots as steps need them, so a worker can serve more
  // adapters than a batch can mix (the slots, --max-loras). At least the slots (0, the default:
  // as many as there are). With an adapter reader (set_adapter_reader), more adapters than these
  // are served (up to kMaxServedLoraAdapters): the least recently used one without requests lets
  // go of its weights, and they are read again when a request needs them.
  int64_t max_cpu_loras = 0;
};

// What one sequence produced in one step.
struct SequenceOutput {
  std::string request_id;
  int32_t sample_index = 0;  // parallel sample, or the beam's rank (0 = best)
  std::vector<int32_t> new_token_ids;
  std::string text;                    // newly released text (stop strings held back / removed)
  std::vector<SampleResult> logprobs;  // one per new token when logprobs were requested
  // With prompt_logprobs: the next prompt positions' logprobs, in order (the first position
  // reported is 1). They come in outputs of their own (sample_index 0, no tokens, not
  // finished), before the request's first token.
  std::vector<SampleResult> prompt_logprobs;
  // An embedding request's result (SamplingParams::embed): the prompt's last hidden state,
  // L2-normalized (all zeros if it was zero), in the one output that finishes the request
  // (reason stop, no tokens).
  std::vector<float> embedding;
  FinishReason finish_reason = FinishReason::kNone;
  double cumulative_logprob = 0.0;  // beams only: the beam's sum of token logprobs
  // Set (with kAbort) when the backend could not serve this sequence, e.g. the sampler found no
  // finite logit: the request must end with this error, not as a silent abort.
  absl::Status error;
  bool finished() const { return finish_reason != FinishReason::kNone; }
  // Prompt logprobs and nothing of a sample's: no sample's delta.
  bool only_prompt_logprobs() const {
    return !prompt_logprobs.empty() && new_token_ids.empty() && !finished();
  }
};

struct EngineStats {
  int64_t steps = 0;
  int64_t preemptions_recompute = 0;
  int64_t preemptions_swap = 0;
  int64_t swap_fallbacks = 0;  // swap preemptions done by recompute: the swap pool was short
  int64_t swapped_out_blocks = 0;
  int64_t swapped_in_blocks = 0;
  int64_t peak_used_blocks = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t computed_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  // Live token slots / slots of the blocks sequences hold, averaged over steps; -1 unless
  // EngineOptions::collect_kv_stats.
  double kv_live_token_ratio = -1.0;
  int64_t num_kv_blocks = 0;
  int64_t num_swap_blocks = 0;
  int tensor_parallel_size = 1;
  double collective_seconds = 0;  // the backend's, so far (Backend::collective_seconds)
  // Structured output: token masks computed / served from a cache, and the time they took.
  // Speculation: drafted tokens the model checked, and those it confirmed.
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // The step's fixed cost in tokens of work, as measured (StepCostModel::free_tokens).
  double spec_free_tokens = 0;
  int64_t structured_masks_computed = 0;
  int64_t structured_masks_cached = 0;
  double structured_mask_seconds = 0;
  // LoRA adapters loaded while serving that a step put into a backend slot (on a GPU: uploaded),
  // the first time or after another took their slot.
  int64_t lora_slot_loads = 0;
  // Adapters read again from their directories after their host copies were let go
  // (EngineOptions::max_cpu_loras).
  int64_t lora_adapter_reads = 0;
  [[nodiscard]] int64_t preemptions() const { return preemptions_recompute + preemptions_swap; }
};

class Engine {
 public:
  // `backend` and `tokenizer` are borrowed and must outlive the engine. InvalidArgument for bad
  // options.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(Backend* backend,
                                                        const Tokenizer* tokenizer,
                                                        const EngineOptions& options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Validates and queues a request. InvalidArgument for an empty prompt, ids outside the
  // vocabulary, bad sampling parameters, more parallel sequences than --max-num-seqs, or
  // prompt + max_tokens beyond max_model_len (the message names both numbers); AlreadyExists for
  // a duplicate id; OutOfRange when the request could never fit in the KV pool. Parallel samples
  // (n > 1) that the pool cannot hold all at once run as one group per sample, each scheduled and
  // preempted on its own (their outputs keep the request id and sample index; Abort and
  // RequestState take the request as a whole); beams, and samples with prompt_logprobs, must fit
  // together. `prebuilt`:
  // BuildGrammar(params.structured_output) (structured_outputs.h) when the caller built it on
  // its own thread; the engine builds it otherwise, unless a recent request had the same
  // constraint.
  // `resumed`: a request resumed elsewhere (its worker died mid-stream): per sample, the tokens
  // it had generated there. Each sample goes on after them as if it had generated them here
  // (detokenizer, stop strings, grammar, penalties, max_tokens and the seeded draws all see
  // them), and emits only what follows: the first output's text is what the first worker held
  // back, then new tokens. With n > 1 every unfinished sample runs as a group of its own (as
  // samples a pool cannot hold together), and a finished one does not run again.
  // InvalidArgument unless there is one entry per sample (n), no beam search, embedding or
  // prompt logprobs, some sample is unfinished, and an unfinished sample's tokens are fewer than
  // max_tokens and none of them ended its output.
  absl::Status AddRequest(const std::string& request_id, std::vector<int32_t> prompt_ids,
                          const SamplingParams& params,
                          std::optional<structured::Grammar> prebuilt = std::nullopt,
                          const ResumedOutput& resumed = {});
  // Removes the request wherever it is and frees its blocks. NotFound if unknown or finished.
  absl::Status Abort(const std::string& request_id);

  // Serves `adapter` from now on. It goes into a backend slot at once when one is empty or
  // holds a moving adapter that the last step did not use (the backend checks that it fits),
  // else when a step needs it (see AdapterTable). When max_cpu_loras are held, the least
  // recently used one without requests lets go of its weights first (with an adapter reader).
  // AlreadyExists when an adapter of that name is served; ResourceExhausted when
  // kMaxServedLoraAdapters are, when max_cpu_loras are held and none can let go (no reader, or
  // each has requests), or when every slot holds a fixed adapter; the backend's error when it
  // cannot take it (InvalidArgument: it does not fit; Unimplemented).
  absl::Status LoadAdapter(std::shared_ptr<const LoraAdapter> adapter);
  // Stops serving the adapter `name`: new requests for it get NotFound at once; those admitted
  // finish with it, and its slot is emptied after the last. NotFound when not served.
  absl::Status UnloadAdapter(const std::string& name);
  // Reads adapter `spec` (its name and directory) again, after the engine let go of its host
  // copy; `ticket` goes back with the result to AdapterRead. Called on the engine thread: it
  // must not block (queue the read and return).
  using AdapterReader =
      std::function<void(int32_t id, uint64_t ticket, const LoraModuleSpec& spec)>;
  // Without one (the default), the engine never lets go of an adapter: LoadAdapter refuses one
  // beyond max_cpu_loras.
  void set_adapter_reader(AdapterReader reader);
  // The read `ticket` of adapter `id` ended. The requests that waited for it are scheduled; or,
  // when it failed, they end (their ids are appended to `failed`; the caller tells them
  // `result`'s error). A read of an adapter forgotten meanwhile is ignored.
  void AdapterRead(int32_t id, uint64_t ticket,
                   absl::StatusOr<std::shared_ptr<const LoraAdapter>> result,
                   std::vector<std::string>* failed);
  // The LoRA adapters served now (unloading ones excluded).
  [[nodiscard]] std::vector<std::string> served_adapters() const { return adapters_.Served(); }

  // Runs one iteration; appends outputs to `outputs` (not cleared). An error from the backend
  // is returned and fails the step's requests; the engine stays usable.
  absl::Status Step(std::vector<SequenceOutput>* outputs);

  // Requests a Step would work on (not those waiting for their adapter to be read).
  [[nodiscard]] bool HasUnfinished() const { return groups_.size() > parked_.size(); }
  // Where the request is (waiting, running, swapped out); nullopt once finished or unknown.
  [[nodiscard]] std::optional<GroupState> RequestState(const std::string& request_id) const;
  [[nodiscard]] EngineStats stats() const;
  // Waiting to be scheduled, or for their adapter's weights to be read again.
  [[nodiscard]] int64_t num_waiting() const {
    return scheduler_->num_waiting() + static_cast<int64_t>(parked_.size());
  }
  [[nodiscard]] int64_t num_running() const { return scheduler_->num_running(); }
  [[nodiscard]] int64_t num_swapped() const { return scheduler_->num_swapped(); }
  [[nodiscard]] int64_t max_model_len() const { return max_model_len_; }
  [[nodiscard]] int64_t max_num_seqs() const { return options_.max_num_seqs; }
  // Device blocks some sequence holds now (0 once idle: nothing leaked).
  [[nodiscard]] int64_t num_used_blocks() const;
  [[nodiscard]] const BlockManager& block_manager() const { return *block_manager_; }

 private:
  // A scheduled sequence whose next token is chosen this step, and its sampling rows:
  // sampling_.rows[first_row, + num_rows). Several rows when a group with n > 1 samples its
  // first tokens (row i for sample i, all from the prompt's last logits).
  struct Sampled {
    Sequence* seq;
    int32_t first_row;
    int32_t num_rows;
    int32_t num_draft;  // > 0: rows for the token after each of seq->draft's (num_rows - 1)
  };
  struct MaskedRows {  // sampling_rows_[first_row, + num_rows) take structured_'s mask handle
    int32_t first_row;
    int32_t num_rows;
    int64_t handle;
  };
  struct EmbedRow {  // an embedding request's last prompt token: its final hidden state is due
    SequenceGroup* group;
    Sequence* seq;
  };
  struct GroupSpan {  // a group's entries in sampled_, and its scoring rows
    SequenceGroup* group;
    size_t first;
    size_t count;
    int32_t first_scored;  // sampling_rows_[first_scored, + num_scored): prompt positions
    int32_t num_scored;
  };

  Engine() = default;
  std::unique_ptr<Sequence> NewSequence(const SequenceGroup& group, int32_t sample_index,
                                        std::vector<int32_t> tokens, SamplingRng rng);
  // Flattens the scheduled chunks into batch_ and the rows to sample into sampling_rows_.
  void BuildBatch(const SchedulerOutput& sched);
  // Sets the draft of every decode that speculation applies to (Sequence::draft).
  void ProposeDrafts();
  // True when `id` ends a request's output (EOS unless ignore_eos, or a stop token id).
  [[nodiscard]] bool EndsOutput(const SamplingParams& p, int32_t id) const;
  // AddRequest's resumed tokens of one sample: checks them and takes `seq` (the group's only
  // sequence, not yet scheduled) through them, discarding the text it would have emitted.
  absl::Status Resume(const SequenceGroup& group, Sequence* seq,
                      std::span<const int32_t> resumed_output) const;
  // Cuts `draft` before its first token that `matcher`'s grammar refuses or that ends the
  // output, and after one that completes it.
  void CutDraftToGrammar(const SamplingParams& p, structured::GrammarMatcher matcher,
                         std::vector<int32_t>* draft) const;
  // `num_draft` > 0: the sequence's tokens end with that many drafted ones, whose logits rows
  // follow logits_row: one row for the token after each.
  void AddSamplingRows(SequenceGroup* group, Sequence* seq, int32_t logits_row, int32_t num_draft);
  // Adds a scoring row for each prompt position of the chunk whose logprob is due; the chunk's
  // tokens start at token index row_start.
  void AddScoringRows(const ScheduledSeq& s, int32_t row_start, GroupSpan* span);
  // Fetches the hidden states of embed_rows_ and ends each of their requests with its embedding
  // (or with the error: the backend's, or FailedPrecondition for a state that is not finite).
  void EmitEmbeddings(std::vector<SequenceOutput>* outputs);
  // Emits the span's prompt logprobs and advances the group past them. On a failed row, ends
  // the request with its error instead and returns false.
  bool EmitPromptLogprobs(const GroupSpan& span, std::vector<SequenceOutput>* outputs);
  // Turns the group's sampled rows into tokens, forks and finishes (into result_) and streams
  // them (detokenized, stop-checked) into `outputs`.
  void SampleGroup(SequenceGroup* group, std::span<const Sampled> sampled,
                   std::vector<SequenceOutput>* outputs);
  // Streams the sequence's tokens of this step: rows[0]'s, then rows[i]'s while rows[i - 1]
  // chose draft[i - 1] and nothing ended the sequence. REQUIRES: draft.size() >= rows.size() - 1.
  void AcceptSample(SequenceGroup* group, Sequence* seq, std::span<const SampledRow> rows,
                    std::span<const int32_t> draft, std::vector<SequenceOutput>* outputs);
  // Appends one sampled token to `out`; false when the sequence ended (finished or failed).
  bool AcceptToken(SequenceGroup* group, Sequence* seq, const SampledRow& row, SequenceOutput* out);
  void BeamStepGroup(SequenceGroup* group, std::span<const Sampled> sampled,
                     std::vector<SequenceOutput>* outputs);
  // Emits a finished beam search's best beam_width hypotheses, best first.
  void EmitBeams(SequenceGroup* group, std::vector<SequenceOutput>* outputs);
  // Ends every listed group with an abort output per live sequence and removes it.
  void FailGroups(const std::vector<SequenceGroup*>& groups, std::vector<SequenceOutput>* outputs);
  // FailGroups for every group of the step.
  void FailScheduled(const SchedulerOutput& sched, std::vector<SequenceOutput>* outputs);
  // Takes the group out of the scheduler (RemoveGroup) and destroys it, releasing its adapter
  // (EraseGroup: for groups the scheduler has already let go).
  void RemoveGroup(SequenceGroup* group);
  void EraseGroup(SequenceGroup* group);
  // A request holding adapter `id` ended: drops it if it was retiring and this was the last.
  void ReleaseAdapter(int32_t id);
  // Forgets the retired adapter `id` that no request holds, emptying its slot.
  void DropAdapter(int32_t id);
  // Lets go of `id`'s host copy (AdapterTable::EvictionCandidate), emptying its slot.
  void EvictAdapter(int32_t id);
  // Holds `group` (its adapter not held) until the adapter's read ends, starting it if due.
  void ParkForAdapter(SequenceGroup* group);
  // Starts the reads due, in order, while host memory has room or can make it.
  void StartReads();
  // Empties `slot` in the backend; if the backend fails to, the slot is never used again.
  // False then.
  bool EmptySlot(int32_t slot);
  // Puts every moving adapter the step uses into a slot (the scheduler keeps them within the
  // slots free for them). The backend's error when it fails.
  absl::Status PlaceAdapters(const SchedulerOutput& sched);
  // Puts adapter `id` into `slot` (from SlotToFill), emptying it first.
  absl::Status PlaceAdapter(int32_t id, int32_t slot);

  Backend* backend_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  EngineOptions options_;
  int64_t max_model_len_ = 0;
  int64_t block_table_stride_ = 0;  // ceil(max_model_len_ / block_size)
  int64_t max_scored_tokens_ = 0;   // prompt positions a step may score (<= 0: none)
  std::vector<int32_t> eos_ids_;    // the tokenizer's end-of-generation ids
  std::unique_ptr<BlockManager> block_manager_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<StructuredOutputs> structured_;
  // By SequenceGroup::key: the request id, or a split request's PartKey (engine.cc) per sample.
  absl::flat_hash_map<std::string, std::unique_ptr<SequenceGroup>> groups_;
  struct Split {
    int32_t parts;  // its samples, one group each
    int32_t left;   // groups not yet erased
  };
  absl::flat_hash_map<std::string, Split> split_;  // by request id
  AdapterTable adapters_{{}, 0};
  int64_t adapter_step_ = 0;   // steps that used an adapter, for AdapterTable::Touch
  int64_t adapter_loads_ = 0;  // moving adapters put into a slot (EngineStats)
  int64_t adapter_reads_ = 0;  // adapters read again (EngineStats)
  AdapterReader adapter_reader_;
  std::vector<SequenceGroup*> parked_;  // waiting for their adapter's read, in arrival order
  std::deque<int32_t> reads_due_;       // adapters to read again once host memory has room
  int64_t next_arrival_ = 0;
  int64_t next_seq_id_ = 0;
  int64_t generated_tokens_ = 0;
  int64_t peak_used_blocks_ = 0;
  double live_ratio_sum_ = 0.0;
  int64_t live_ratio_steps_ = 0;
  // Per-step buffers, reused.
  ForwardBatch batch_;
  std::vector<int32_t> token_ids_, positions_, token_seq_, query_start_, seq_lens_, block_tables_,
      logit_indices_, seq_adapter_;
  std::vector<int64_t> slots_;
  std::vector<SamplingRow> sampling_rows_;
  SamplerOutput sampled_rows_;
  std::vector<Sampled> sampled_;
  std::vector<MaskedRows> masked_rows_;
  std::vector<GroupSpan> group_spans_;
  std::vector<EmbedRow> embed_rows_;
  std::vector<int32_t> embed_logits_rows_;  // embed_rows_'s logits rows, in order
  std::vector<float> hidden_;               // their hidden states
  std::vector<BeamCandidate> candidates_;
  StepResult result_;
  std::vector<SequenceGroup*> finished_groups_;
  std::vector<SequenceGroup*> failed_groups_;
  // Forward-pass times (with speculation), for ProposeDrafts. The prior: a CPU step's fixed
  // cost is worth ~4 tokens (SmolLM2 here: 5 ms for one token, 62 ms for 64).
  StepCostModel step_cost_{4.0};
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_ENGINE_H_
