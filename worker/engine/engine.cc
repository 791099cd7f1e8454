// One step: n-gram drafts for the decodes that speculate -> Schedule() -> execute the step's KV
// copies (swap-out, swap-in, copy-on-write) -> flatten the scheduled chunks into a ForwardBatch,
// and the sequences whose next token is due into sampling rows (one per drafted token too) ->
// Backend::Forward (the model and sampling) -> per group: accept the sampled tokens (forking
// n > 1 samples at the first token; past each drafted token the model confirmed) or take a
// beam-search step, detokenize and check stop conditions, emit outputs -> Scheduler::Update
// applies the step's tokens, forks and finishes -> finished groups are destroyed (beams emit
// their hypotheses).
//
// A request's sampling draws depend only on (seed, sample index, output position), and every
// kernel is row-local, so a request's tokens do not depend on the rest of the batch, on
// preemption, on chunking, or on speculation.
#include "worker/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/prefix_cache/block_hash.h"
#include "common/status_macros.h"

namespace pagellm {
namespace {

// Blocks a request may occupy: the pool less the admission watermark.
int64_t UsableBlocks(int64_t num_kv_blocks, double watermark) {
  return num_kv_blocks - static_cast<int64_t>(watermark * num_kv_blocks);
}

// groups_'s key for sample `part` of a split request. Request ids are text; the unit separator
// keeps the keys apart from them (AddRequest refuses an id that is taken either way).
std::string PartKey(const std::string& request_id, int32_t part) {
  return absl::StrCat(request_id, "\x1f", part);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(Backend* backend, const Tokenizer* tokenizer,
                                                       const EngineOptions& options) {
  if (options.max_num_batched_tokens <= 0 || options.max_num_seqs <= 0)
    return absl::InvalidArgumentError("max_num_batched_tokens and max_num_seqs must be positive");
  if (options.max_num_batched_tokens > backend->max_batch_tokens())
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_batched_tokens ", options.max_num_batched_tokens,
                     " exceeds the backend's ", backend->max_batch_tokens()));
  RETURN_IF_ERROR(options.speculative.Validate());
  std::unique_ptr<Engine> e(new Engine());
  e->backend_ = backend;
  e->adapters_ = AdapterTable(backend->adapter_names(), options.max_cpu_loras);
  e->tokenizer_ = tokenizer;
  e->options_ = options;
  const int64_t ctx = backend->config().max_position_embeddings;
  if (options.max_model_len > ctx) {  // as vLLM: positions past the model's are not served
    return absl::InvalidArgumentError(absl::StrCat("max_model_len ", options.max_model_len,
                                                   " exceeds the model's context length of ", ctx,
                                                   " positions"));
  }
  e->max_model_len_ = options.max_model_len > 0 ? options.max_model_len : ctx;
  // One sequence of max_model_len tokens must fit the pool, or requests within the limits (a
  // chat request's default max_tokens is the rest of the context) could never run.
  const int64_t bs = backend->block_size();
  const int64_t usable = UsableBlocks(backend->num_kv_blocks(), options.watermark);
  if (usable <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the KV pool of ", backend->num_kv_blocks(), " blocks has none usable"));
  }
  if (e->max_model_len_ > usable * bs) {
    if (options.max_model_len > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_model_len ", e->max_model_len_, " needs ", (e->max_model_len_ + bs - 1) / bs,
          " KV blocks for one sequence; the pool has ", usable, " usable (", usable * bs,
          " tokens): enlarge the KV pool or lower max_model_len to at most ", usable * bs));
    }
    PLOG_WARN(
        "max_model_len lowered from the model's {} to {} tokens: what the KV pool ({} usable "
        "blocks of {}) holds for one sequence",
        e->max_model_len_, usable * bs, usable, bs);
    e->max_model_len_ = usable * bs;
  }
  BlockManager::Options bo;
  bo.num_device_blocks = static_cast<int32_t>(backend->num_kv_blocks());
  bo.num_swap_blocks = static_cast<int32_t>(backend->num_swap_blocks());
  bo.block_size = static_cast<int32_t>(backend->block_size());
  bo.watermark = options.watermark;
  bo.enable_prefix_caching = options.enable_prefix_caching;
  std::random_device entropy;  // a restarted worker's filter versions are new to the router
  bo.prefix_filter_version = (uint64_t{entropy()} << 32) | entropy() | 1;
  ASSIGN_OR_RETURN(e->block_manager_, BlockManager::Create(bo));
  SchedulerOptions so;
  so.max_num_batched_tokens = options.max_num_batched_tokens;
  so.long_prefill_token_threshold = options.long_prefill_token_threshold;
  so.max_num_seqs = options.max_num_seqs;
  so.preemption_mode = options.preemption_mode;
  so.policy = options.scheduling_policy;
  // A step's logits rows are at most its tokens, and at most its sequences plus the prompt
  // positions it scores: those must fit the backend's rows.
  e->max_scored_tokens_ =
      backend->max_logits_rows() >= options.max_num_batched_tokens
          ? kMaxScoredRowsPerStep
          : std::min(kMaxScoredRowsPerStep, backend->max_logits_rows() - options.max_num_seqs);
  so.max_scored_tokens = std::max<int64_t>(e->max_scored_tokens_, 1);
  so.lora_slots = e->adapters_.moving_slots();
  e->scheduler_ = std::make_unique<Scheduler>(so, e->block_manager_.get());
  e->block_table_stride_ = (e->max_model_len_ + bo.block_size - 1) / bo.block_size;
  e->eos_ids_ = tokenizer->end_of_generation_ids();
  for (int32_t id : e->eos_ids_) {
    if (id < 0 || id >= backend->config().vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "EOS token id ", id, " is outside the vocab of ", backend->config().vocab_size));
    }
  }
  e->structured_ =
      std::make_unique<StructuredOutputs>(tokenizer, backend->config().vocab_size, e->eos_ids_);
  return e;
}

Engine::~Engine() {
  for (auto& [id, group] : groups_) {
    if (!group->parked) scheduler_->Remove(group.get());
  }
}

std::unique_ptr<Sequence> Engine::NewSequence(const SequenceGroup& group, int32_t sample_index,
                                              std::vector<int32_t> tokens, SamplingRng rng) {
  auto seq = std::make_unique<Sequence>();
  seq->seq_id = next_seq_id_++;
  seq->sample_index = sample_index;
  seq->prompt_len =
      group.seqs.empty() ? static_cast<int64_t>(tokens.size()) : group.seqs.front()->prompt_len;
  seq->tokens = std::move(tokens);
  seq->tokens.reserve(seq->prompt_len + group.params.max_tokens);
  seq->rng = rng;
  if (!group.params.UseBeamSearch()) {
    seq->stop = std::make_unique<StopChecker>(group.stop_conditions);
    seq->detok =
        std::make_unique<StreamingDetokenizer>(tokenizer_, group.params.skip_special_tokens);
  }
  return seq;
}

absl::Status Engine::AddRequest(const std::string& request_id, std::vector<int32_t> prompt_ids,
                                const SamplingParams& params,
                                std::optional<structured::Grammar> prebuilt,
                                const ResumedOutput& resumed) {
  const int64_t vocab = backend_->config().vocab_size;
  if (prompt_ids.empty()) return absl::InvalidArgumentError("the prompt is empty");
  for (int32_t id : prompt_ids) {
    if (id < 0 || id >= vocab)
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", id, " outside the vocabulary of ", vocab));
  }
  RETURN_IF_ERROR(params.Validate(vocab));
  if (params.priority != 0 && options_.scheduling_policy != SchedulingPolicy::kPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority ", params.priority,
                     " needs priority scheduling: this worker runs --scheduling-policy fcfs"));
  }
  if (params.prompt_logprobs.has_value() && max_scored_tokens_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_logprobs: this worker's backend holds ", backend_->max_logits_rows(),
        " logits rows per step, none beyond its ", options_.max_num_seqs, " sequences"));
  }
  const int64_t num_seqs = params.NumSequences();
  if (num_seqs > options_.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request runs ", num_seqs, " sequences; max_num_seqs is ", options_.max_num_seqs));
  }
  if (params.UseBeamSearch() && params.beam_width > options_.max_num_batched_tokens) {
    return absl::InvalidArgumentError("beam_width exceeds max_num_batched_tokens");
  }
  if (params.embed && backend_->config().hidden_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", backend_->name(), " backend has no hidden states to embed with"));
  }
  const int64_t total = params.MaxContext(static_cast<int64_t>(prompt_ids.size()));
  RETURN_IF_ERROR(params.CheckContext(static_cast<int64_t>(prompt_ids.size()), max_model_len_));
  // The request must fit alone even when all its sequences are recomputed separately, or it
  // could be preempted and re-admitted forever.
  const int64_t bs = backend_->block_size();
  const int64_t seq_blocks = (total + bs - 1) / bs;
  const int64_t usable = UsableBlocks(backend_->num_kv_blocks(), options_.watermark);
  // Parallel samples that the pool cannot hold all at once run as one group per sample, as vLLM
  // v1 runs every parallel sample: each is scheduled and preempted on its own, and they share
  // the prompt only through the prefix cache. Beams and prompt logprobs need the group.
  int32_t parts = 1;
  if (!resumed.empty()) {
    if (params.UseBeamSearch() || params.embed || params.prompt_logprobs.has_value()) {
      return absl::InvalidArgumentError(
          "resumed_output: a request with beam search, embedding or prompt logprobs cannot be "
          "resumed");
    }
    if (std::ssize(resumed.samples) != num_seqs) {
      return absl::InvalidArgumentError(absl::StrCat("resumed_output: ", resumed.samples.size(),
                                                     " samples for a request of ", num_seqs));
    }
    if (std::ranges::all_of(resumed.samples, &ResumedOutput::Sample::finished)) {
      return absl::InvalidArgumentError("resumed_output: every sample ended: nothing is left");
    }
    // Samples resumed after different numbers of tokens no longer share a first token.
    if (num_seqs > 1) parts = static_cast<int32_t>(num_seqs);
  }
  if (num_seqs * seq_blocks > usable) {
    if (seq_blocks > usable || params.UseBeamSearch() || params.prompt_logprobs.has_value()) {
      // OUT_OF_RANGE, not RESOURCE_EXHAUSTED: retrying cannot help (HTTP 400, not 429).
      return absl::OutOfRangeError(absl::StrCat(
          "the request needs up to ", num_seqs * seq_blocks, " KV blocks; the pool has ", usable,
          " usable",
          seq_blocks <= usable ? (params.UseBeamSearch() ? " (beams run together)"
                                                         : " (samples with prompt_logprobs run "
                                                           "together)")
                               : ""));
    }
    parts = static_cast<int32_t>(num_seqs);
  }
  int32_t adapter = -1;
  if (!params.lora_adapter.empty()) {
    ASSIGN_OR_RETURN(adapter, adapters_.Find(params.lora_adapter));
    if (adapters_.moves(adapter) && adapters_.moving_slots() == 0) {
      // Every slot broke (see EmptySlot): it could never run.
      return absl::UnavailableError(
          absl::StrCat("no LoRA slot can take adapter `", params.lora_adapter, "` any more"));
    }
  }
  if (groups_.contains(request_id) || split_.contains(request_id))
    return absl::AlreadyExistsError(absl::StrCat("request id '", request_id, "' is in use"));
  if (parts > 1) {
    for (int32_t i = 0; i < parts; ++i) {
      if (groups_.contains(PartKey(request_id, i)))
        return absl::AlreadyExistsError(absl::StrCat("request id '", request_id, "' is in use"));
    }
  }
  std::shared_ptr<structured::CompiledGrammar> grammar;
  if (params.structured_output.enabled()) {
    ASSIGN_OR_RETURN(grammar, structured_->Compile(params.structured_output, std::move(prebuilt)));
  }
  std::vector<uint64_t> allowed_mask;
  if (!params.allowed_token_ids.empty()) allowed_mask = structured_->AllowedMask(params);
  std::shared_ptr<const StopConditions> stop_conditions;
  if (!params.UseBeamSearch()) {
    stop_conditions = StopConditions::Create(params, tokenizer_->end_of_generation_ids());
  }
  const SamplingRng rng = SamplingRng::ForRequest(params);
  // Every group is built (and a resumed one checked) before any is registered.
  std::vector<std::unique_ptr<SequenceGroup>> built;
  built.reserve(parts);
  int32_t last_part = parts - 1;  // the last one built takes prompt_ids
  while (!resumed.empty() && resumed.samples[last_part].finished) --last_part;
  for (int32_t part = 0; part < parts; ++part) {
    if (!resumed.empty() && resumed.samples[part].finished) continue;
    auto group = std::make_unique<SequenceGroup>();
    group->request_id = request_id;
    group->key = parts > 1 ? PartKey(request_id, part) : request_id;
    group->arrival = next_arrival_++;
    group->params = params;
    group->adapter = adapter;
    group->allowed_mask = allowed_mask;
    group->stop_conditions = stop_conditions;
    group->max_seqs = num_seqs;
    if (parts > 1) {
      group->params.n = 1;  // sample `part` of n: its own stream, as the group's would be
      group->max_seqs = 1;
    }
    group->seqs.push_back(NewSequence(
        *group, part, part < last_part ? prompt_ids : std::move(prompt_ids), rng.ForSample(part)));
    if (grammar != nullptr) group->seqs.front()->grammar.emplace(grammar);
    if (!resumed.empty() && !resumed.samples[part].tokens.empty()) {
      RETURN_IF_ERROR(Resume(*group, group->seqs.front().get(), resumed.samples[part].tokens));
      group->forked = true;  // its first token was sampled (one sample: nothing forks)
    }
    built.push_back(std::move(group));
  }
  for (std::unique_ptr<SequenceGroup>& group : built) {
    if (adapter >= 0) {
      adapters_.Acquire(adapter);
      group->adapter_swaps = adapters_.moves(adapter);
    }
    group->cache_namespace = SaltedCacheNamespace(
        adapter >= 0 ? adapters_.cache_namespace(adapter) : 0, group->params.cache_salt);
    SequenceGroup* g = group.get();
    groups_.emplace(g->key, std::move(group));
    if (adapter >= 0 && !adapters_.held(adapter)) {
      ParkForAdapter(g);  // until its weights are read again
    } else {
      scheduler_->Add(g);
    }
  }
  if (parts > 1) split_.emplace(request_id, Split{parts, static_cast<int32_t>(built.size())});
  return absl::OkStatus();
}

absl::Status Engine::Resume(const SequenceGroup& group, Sequence* seq,
                            std::span<const int32_t> resumed_output) const {
  const SamplingParams& p = group.params;  // one sample (AddRequest checked the request)
  if (static_cast<int64_t>(resumed_output.size()) >= p.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("resumed_output: ", resumed_output.size(),
                                                   " tokens leave nothing of max_tokens ",
                                                   p.max_tokens));
  }
  const int64_t vocab = backend_->config().vocab_size;
  std::string discarded;  // the text the first worker emitted (or held back) for them
  for (size_t i = 0; i < resumed_output.size(); ++i) {
    const int32_t id = resumed_output[i];
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("resumed_output token id ", id, " outside the vocabulary of ", vocab));
    }
    bool grammar_done = false;
    if (seq->grammar.has_value() && !EndsOutput(p, id)) {
      if (absl::Status st = seq->grammar->Accept(id); !st.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("resumed_output token ", i, ": ", st.message()));
      }
      grammar_done = seq->grammar->MustEnd();
    }
    discarded.clear();
    const StopDecision d = seq->stop->Append(id, seq->detok->Feed(id), &discarded);
    if (d.finished() || grammar_done) {
      return absl::InvalidArgumentError(
          absl::StrCat("resumed_output ends the output at token ", i, ": nothing is left to do"));
    }
    seq->tokens.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status Engine::Abort(const std::string& request_id) {
  if (auto split = split_.find(request_id); split != split_.end()) {
    const int32_t parts = split->second.parts;
    for (int32_t i = 0; i < parts; ++i) {  // the last removal forgets split_'s entry
      if (auto it = groups_.find(PartKey(request_id, i)); it != groups_.end()) {
        RemoveGroup(it->second.get());
      }
    }
    return absl::OkStatus();
  }
  auto it = groups_.find(request_id);
  if (it == groups_.end())
    return absl::NotFoundError(absl::StrCat("no request '", request_id, "'"));
  RemoveGroup(it->second.get());
  return absl::OkStatus();
}

void Engine::RemoveGroup(SequenceGroup* group) {
  if (group->parked) {
    std::erase(parked_, group);
  } else {
    scheduler_->Remove(group);
  }
  EraseGroup(group);
}

void Engine::EraseGroup(SequenceGroup* group) {
  const int32_t adapter = group->adapter;
  if (group->key != group->request_id) {  // a part of a split request
    auto split = split_.find(group->request_id);
    if (split != split_.end() && --split->second.left == 0) split_.erase(split);
  }
  groups_.erase(group->key);
  if (adapter >= 0) ReleaseAdapter(adapter);
}

std::optional<GroupState> Engine::RequestState(const std::string& request_id) const {
  if (auto split = split_.find(request_id); split != split_.end()) {
    // Waiting until a part has been scheduled; running while one runs.
    std::optional<GroupState> state;
    for (int32_t i = 0; i < split->second.parts; ++i) {
      auto it = groups_.find(PartKey(request_id, i));
      if (it == groups_.end()) continue;
      const GroupState s = it->second->state;
      if (!state.has_value() || s == GroupState::kRunning ||
          (s == GroupState::kSwapped && *state == GroupState::kWaiting)) {
        state = s;
      }
    }
    return state;
  }
  auto it = groups_.find(request_id);
  if (it == groups_.end()) return std::nullopt;
  return it->second->state;
}

int64_t Engine::num_used_blocks() const { return block_manager_->GetStats().device_used; }

EngineStats Engine::stats() const {
  const SchedulerStats& s = scheduler_->stats();
  EngineStats e;
  e.steps = s.steps;
  e.preemptions_recompute = s.preemptions_recompute;
  e.preemptions_swap = s.preemptions_swap;
  e.swap_fallbacks = s.swap_fallbacks;
  e.swapped_out_blocks = s.swapped_out_blocks;
  e.swapped_in_blocks = s.swapped_in_blocks;
  e.peak_used_blocks = peak_used_blocks_;
  e.prefix_cache_hit_tokens = s.prefix_cache_hit_tokens;
  e.computed_prompt_tokens = s.computed_prompt_tokens;
  e.generated_tokens = generated_tokens_;
  if (live_ratio_steps_ > 0) e.kv_live_token_ratio = live_ratio_sum_ / live_ratio_steps_;
  e.num_kv_blocks = backend_->num_kv_blocks();
  e.num_swap_blocks = backend_->num_swap_blocks();
  e.tensor_parallel_size = backend_->tensor_parallel_size();
  e.collective_seconds = backend_->collective_seconds();
  e.spec_draft_tokens = s.draft_tokens;
  e.spec_accepted_tokens = s.accepted_tokens;
  e.spec_free_tokens = step_cost_.free_tokens();
  e.structured_masks_computed = structured_->masks_computed();
  e.structured_masks_cached = structured_->masks_cached();
  e.structured_mask_seconds = structured_->mask_seconds();
  e.lora_slot_loads = adapter_loads_;
  e.lora_adapter_reads = adapter_reads_;
  return e;
}

void Engine::BuildBatch(const SchedulerOutput& sched) {
  const int64_t bs = backend_->block_size();
  const int64_t stride = block_table_stride_;
  token_ids_.clear();
  positions_.clear();
  token_seq_.clear();
  slots_.clear();
  query_start_.clear();
  seq_lens_.clear();
  seq_adapter_.clear();
  bool any_adapter = false;
  logit_indices_.clear();
  sampling_rows_.clear();
  sampled_.clear();
  group_spans_.clear();
  embed_rows_.clear();
  embed_logits_rows_.clear();
  masked_rows_.clear();
  structured_->BeginStep();
  block_tables_.resize(sched.seqs.size() * stride);
  query_start_.push_back(0);
  // The group's entry in group_spans_, made on its first row to score or sample.
  auto span_of = [this](SequenceGroup* group) -> GroupSpan& {
    if (group_spans_.empty() || group_spans_.back().group != group) {
      group_spans_.push_back({group, sampled_.size(), 0, 0, 0});
    }
    return group_spans_.back();
  };
  // A draft joins its sequence's tokens until the forward pass is done (Step takes it out
  // again): the batch reads it as known tokens, and row i samples after output + draft[0, i).
  for (const ScheduledSeq& s : sched.seqs) {
    if (s.num_draft > 0)
      s.seq->tokens.insert(s.seq->tokens.end(), s.seq->draft.begin(), s.seq->draft.end());
  }
  for (size_t i = 0; i < sched.seqs.size(); ++i) {
    const ScheduledSeq& s = sched.seqs[i];
    const Sequence& seq = *s.seq;
    const auto row_start = static_cast<int32_t>(token_ids_.size());
    const std::vector<int32_t>& table = block_manager_->BlockTable(seq.seq_id);
    int32_t* row = block_tables_.data() + i * stride;
    std::copy(table.begin(), table.end(), row);
    std::fill(row + table.size(), row + stride, 0);
    for (int64_t t = 0; t < s.num_tokens; ++t) {
      const int64_t pos = seq.num_computed + t;
      token_ids_.push_back(seq.tokens[pos]);
      positions_.push_back(static_cast<int32_t>(pos));
      token_seq_.push_back(static_cast<int32_t>(i));
      slots_.push_back(static_cast<int64_t>(table[pos / bs]) * bs + pos % bs);
    }
    query_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    seq_lens_.push_back(static_cast<int32_t>(seq.num_computed + s.num_tokens));
    seq_adapter_.push_back(s.group->adapter >= 0 ? adapters_.slot(s.group->adapter) : -1);
    any_adapter = any_adapter || s.group->adapter >= 0;
    if (s.group->ScoresPrompt()) AddScoringRows(s, row_start, &span_of(s.group));
    if (!s.sample) continue;
    const int32_t logits_row = static_cast<int32_t>(logit_indices_.size());
    if (s.group->params.embed) {  // no sampling: the last prompt token's hidden state
      logit_indices_.push_back(static_cast<int32_t>(token_ids_.size() - 1));
      embed_rows_.push_back({s.group, s.seq});
      embed_logits_rows_.push_back(logits_row);
      continue;
    }
    for (int64_t t = s.num_draft; t >= 0; --t) {
      logit_indices_.push_back(static_cast<int32_t>(token_ids_.size() - 1 - t));
    }
    ++span_of(s.group).count;
    AddSamplingRows(s.group, s.seq, logits_row, static_cast<int32_t>(s.num_draft));
  }
  for (const MaskedRows& m : masked_rows_) {
    for (int32_t r = m.first_row; r < m.first_row + m.num_rows; ++r) {
      sampling_rows_[r].seq.allowed_tokens = structured_->mask(m.handle);
    }
  }
  ForwardBatch& b = batch_;
  b.num_tokens = static_cast<int64_t>(token_ids_.size());
  b.token_ids = token_ids_.data();
  b.positions = positions_.data();
  b.token_seq = token_seq_.data();
  b.slots = slots_.data();
  b.num_seqs = static_cast<int64_t>(sched.seqs.size());
  b.query_start = query_start_.data();
  b.seq_lens = seq_lens_.data();
  b.block_tables = block_tables_.data();
  b.block_table_stride = stride;
  b.num_logits = static_cast<int64_t>(logit_indices_.size());
  b.logit_indices = logit_indices_.data();
  b.all_decode = b.num_tokens == b.num_seqs && b.num_logits == b.num_tokens;
  b.seq_adapter = any_adapter ? seq_adapter_.data() : nullptr;
}

void Engine::AddSamplingRows(SequenceGroup* group, Sequence* seq, int32_t logits_row,
                             int32_t num_draft) {
  const SamplingParams& p = group->params;
  SamplingRow row;
  row.logits_row = logits_row;
  row.seq.params = &p;
  row.seq.prompt_ids = absl::MakeConstSpan(seq->tokens.data(), seq->prompt_len);
  row.seq.output_ids = absl::MakeConstSpan(seq->tokens.data() + seq->prompt_len, seq->num_output());
  row.seq.rng = seq->rng;
  if (num_draft > 0) {
    // A drafted sequence (not forking): its row i is sampled exactly as the step after
    // draft[0, i) would sample it -- same history, same draw, the grammar's mask in the state
    // after draft[0, i) -- so speculation never changes what a request generates.
    row.seq.allowed_tokens = group->allowed_mask;
    sampled_.push_back(
        {seq, static_cast<int32_t>(sampling_rows_.size()), num_draft + 1, num_draft});
    std::optional<structured::GrammarMatcher> matcher = seq->grammar;
    const int64_t before = seq->num_output() - num_draft;
    for (int32_t i = 0; i <= num_draft; ++i) {
      row.logits_row = logits_row + i;
      row.seq.output_ids = absl::MakeConstSpan(seq->tokens.data() + seq->prompt_len, before + i);
      if (matcher.has_value()) {
        masked_rows_.push_back({static_cast<int32_t>(sampling_rows_.size()), 1,
                                structured_->AddMask(*matcher, p, group->allowed_mask)});
        // CutDraftToGrammar took the draft through these states. Should the grammar still
        // refuse a drafted token (out of states), the rows after it go unused: accepting that
        // token ends the request with the grammar's error.
        if (i < num_draft && !matcher->Accept(seq->draft[i]).ok()) matcher.reset();
      }
      sampling_rows_.push_back(row);
    }
    return;
  }
  if (p.UseBeamSearch()) row.num_top_candidates = 2 * p.beam_width;
  // The first token of a request with n samples: sample i draws from its own stream.
  const int32_t samples = !p.UseBeamSearch() && !group->forked && group->max_seqs > 1
                              ? static_cast<int32_t>(group->max_seqs)
                              : 1;
  sampled_.push_back({seq, static_cast<int32_t>(sampling_rows_.size()), samples, 0});
  if (seq->grammar.has_value()) {
    masked_rows_.push_back({static_cast<int32_t>(sampling_rows_.size()), samples,
                            structured_->AddMask(*seq->grammar, p, group->allowed_mask)});
  } else {
    row.seq.allowed_tokens = group->allowed_mask;  // empty without allowed_token_ids
  }
  for (int32_t i = 0; i < samples; ++i) {
    row.seq.rng = seq->rng.ForSample(i);
    sampling_rows_.push_back(row);
  }
}

void Engine::ProposeDrafts() {
  const NgramOptions& o = options_.speculative;
  if (!o.enabled()) return;
  const bool off =
      o.disable_by_batch_size > 0 && scheduler_->num_running() > o.disable_by_batch_size;
  // A sequence drafts when its drafts are confirmed often enough to pay in a step of this many
  // tokens (DraftPays); one that does not drifts back towards drafting, so it tries again
  // later (after ~30 steps from 0 when one in two pays; never while no acceptance would).
  int64_t decodes = 0;
  for (const auto& [id, group] : groups_) {
    if (group->state == GroupState::kRunning) decodes += static_cast<int64_t>(group->seqs.size());
  }
  const double free_tokens = step_cost_.free_tokens();
  for (const auto& [id, group] : groups_) {
    const SamplingParams& p = group->params;
    if (group->state != GroupState::kRunning || !group->forked || p.UseBeamSearch()) continue;
    for (const auto& seq : group->seqs) {
      seq->draft.clear();  // one the last step had no room for is proposed afresh
      // After the pending token, the draft can only be useful up to max_tokens.
      const int64_t room = p.max_tokens - seq->num_output() - 1;
      if (off || seq->num_uncomputed() != 1 || room <= 0) continue;
      if (!DraftPays(seq->draft_acceptance, decodes, free_tokens)) {
        seq->draft_acceptance += (1.0 - seq->draft_acceptance) / 32;
        continue;
      }
      seq->draft.resize(std::min<int64_t>(o.num_speculative_tokens, room));
      seq->draft.resize(ProposeNgram(seq->tokens, o, seq->draft));
      if (seq->grammar.has_value()) CutDraftToGrammar(p, *seq->grammar, &seq->draft);
    }
  }
}

bool Engine::EndsOutput(const SamplingParams& p, int32_t id) const {
  return (!p.ignore_eos && tokenizer_->IsEndOfGeneration(id)) ||
         std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end();
}

void Engine::CutDraftToGrammar(const SamplingParams& p, structured::GrammarMatcher matcher,
                               std::vector<int32_t>* draft) const {
  size_t keep = 0;
  while (keep < draft->size()) {
    const int32_t id = (*draft)[keep];
    if (EndsOutput(p, id) || !matcher.Accept(id).ok()) break;
    ++keep;
    if (matcher.MustEnd()) break;  // nothing can follow
  }
  draft->resize(keep);
}

absl::Status Engine::Step(std::vector<SequenceOutput>* outputs) {
  ProposeDrafts();
  const SchedulerOutput& sched = scheduler_->Schedule();
  if (!sched.copies.empty()) {
    if (absl::Status st = backend_->CopyKv(sched.copies); !st.ok()) {
      // The blocks involved hold nothing usable: every group scheduled or swapped out fails.
      failed_groups_.clear();
      for (const auto& [id, g] : groups_) {
        if (g->state != GroupState::kWaiting) failed_groups_.push_back(g.get());
      }
      FailGroups(failed_groups_, outputs);
      return st;
    }
  }
  if (sched.seqs.empty()) return absl::OkStatus();
  if (absl::Status st = PlaceAdapters(sched); !st.ok()) {
    FailScheduled(sched, outputs);
    return st;
  }

  const BlockManager::Stats bm_stats = block_manager_->GetStats();
  peak_used_blocks_ = std::max<int64_t>(peak_used_blocks_, bm_stats.device_used);
  if (options_.collect_kv_stats && bm_stats.device_used > 0) {
    live_ratio_sum_ += static_cast<double>(block_manager_->LiveDeviceTokenSlots()) /
                       (static_cast<double>(bm_stats.device_used) * backend_->block_size());
    ++live_ratio_steps_;
  }

  BuildBatch(sched);
  SamplingBatch sampling;
  sampling.rows = sampling_rows_;
  sampling.eos_token_ids = eos_ids_;
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = backend_->Forward(batch_, sampling, &sampled_rows_);
  if (options_.speculative.enabled()) {
    step_cost_.Observe(
        batch_.num_tokens,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  for (const ScheduledSeq& s : sched.seqs) {  // the drafts leave the tokens again
    if (s.num_draft > 0) s.seq->tokens.resize(s.seq->tokens.size() - s.num_draft);
  }
  if (st.ok() && sampled_rows_.rows.size() != sampling_rows_.size()) {
    st = absl::InternalError(absl::StrCat("the backend sampled ", sampled_rows_.rows.size(), " of ",
                                          sampling_rows_.size(), " rows"));
  }
  if (!st.ok()) {
    FailScheduled(sched, outputs);
    return st;
  }

  // The scheduler lists a group's sequences together; decide one group at a time, then let the
  // scheduler apply every decision at once.
  result_.Clear();
  if (!embed_rows_.empty()) EmitEmbeddings(outputs);
  for (const GroupSpan& span : group_spans_) {
    if (span.num_scored > 0 && !EmitPromptLogprobs(span, outputs)) continue;
    if (span.count == 0) continue;
    std::span<const Sampled> sampled(sampled_.data() + span.first, span.count);
    if (span.group->params.UseBeamSearch()) {
      BeamStepGroup(span.group, sampled, outputs);
    } else {
      SampleGroup(span.group, sampled, outputs);
    }
  }
  finished_groups_.clear();
  scheduler_->Update(sched, &result_, &finished_groups_);
  for (SequenceGroup* g : finished_groups_) {
    if (g->params.UseBeamSearch()) EmitBeams(g, outputs);
    EraseGroup(g);
  }
  return absl::OkStatus();
}

void Engine::FailScheduled(const SchedulerOutput& sched, std::vector<SequenceOutput>* outputs) {
  failed_groups_.clear();
  for (const ScheduledSeq& s : sched.seqs) {
    if (failed_groups_.empty() || failed_groups_.back() != s.group) {
      failed_groups_.push_back(s.group);
    }
  }
  FailGroups(failed_groups_, outputs);
}

void Engine::FailGroups(const std::vector<SequenceGroup*>& groups,
                        std::vector<SequenceOutput>* outputs) {
  for (SequenceGroup* g : groups) {
    for (const auto& seq : g->seqs) {
      SequenceOutput out;
      out.request_id = g->request_id;
      out.sample_index = seq->sample_index;
      out.finish_reason = FinishReason::kAbort;
      outputs->push_back(std::move(out));
    }
    RemoveGroup(g);
  }
}

void Engine::SampleGroup(SequenceGroup* group, std::span<const Sampled> sampled,
                         std::vector<SequenceOutput>* outputs) {
  for (const Sampled& s : sampled) {
    const SampledRow* rows = sampled_rows_.rows.data() + s.first_row;
    if (s.num_draft > 0) {  // rows for the token after each drafted one
      AcceptSample(group, s.seq, {rows, static_cast<size_t>(s.num_rows)}, s.seq->draft, outputs);
      continue;
    }
    // The first token of a request with n samples: the children share the computed prompt,
    // and start from the parent's grammar state before its own first token.
    std::optional<structured::GrammarMatcher> start;
    if (s.num_rows > 1) start = s.seq->grammar;
    AcceptSample(group, s.seq, {rows, 1}, {}, outputs);
    for (int32_t i = 1; i < s.num_rows; ++i) {
      std::unique_ptr<Sequence> child =
          NewSequence(*group, i, s.seq->tokens, s.seq->rng.ForSample(i));
      child->grammar = start;
      Sequence* raw = child.get();
      result_.forks.push_back({group, s.seq, std::move(child)});
      AcceptSample(group, raw, {rows + i, 1}, {}, outputs);
    }
  }
}

void Engine::AcceptSample(SequenceGroup* group, Sequence* seq, std::span<const SampledRow> rows,
                          std::span<const int32_t> draft, std::vector<SequenceOutput>* outputs) {
  SequenceOutput out;
  out.request_id = group->request_id;
  out.sample_index = seq->sample_index;
  // rows[i] chose the token after draft[0, i); it counts while every earlier choice was the
  // drafted token.
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i - 1].result.token_id != draft[i - 1]) break;
    if (!AcceptToken(group, seq, rows[i], &out)) break;
  }
  if (out.finished()) result_.finishes.push_back({group, seq, /*keep=*/false});
  outputs->push_back(std::move(out));
}

bool Engine::AcceptToken(SequenceGroup* group, Sequence* seq, const SampledRow& row,
                         SequenceOutput* out) {
  if (!row.status.ok()) {
    out->finish_reason = FinishReason::kAbort;
    out->error = row.status;
    return false;
  }
  const int32_t id = row.result.token_id;
  bool grammar_done = false;
  if (seq->grammar.has_value()) {
    if (!EndsOutput(group->params, id)) {
      if (absl::Status st = seq->grammar->Accept(id); !st.ok()) {
        out->finish_reason = FinishReason::kAbort;
        out->error = std::move(st);
        return false;
      }
      grammar_done = seq->grammar->MustEnd();
    }
  }
  result_.appends.push_back({seq, id});
  ++generated_tokens_;
  out->new_token_ids.push_back(id);
  if (group->params.logprobs.has_value()) out->logprobs.push_back(row.result);
  std::string delta = seq->detok->Feed(id);
  StopDecision d = seq->stop->Append(id, delta, &out->text);
  // The structured output is complete and nothing may follow: end here, without an EOS.
  if (grammar_done && !d.finished()) d = seq->stop->Finish(FinishReason::kStop, &out->text);
  if (d.finished() && d.stop_string_index < 0) {
    // Release the bytes of an incomplete character the detokenizer still holds (as U+FFFD);
    // after a stop string the text past the match is dropped anyway.
    out->text += seq->detok->Flush();
  }
  out->finish_reason = d.finish_reason;
  return !d.finished();
}

}  // namespace pagellm
