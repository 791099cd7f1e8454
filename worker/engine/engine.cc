// One step: Schedule() -> execute the step's KV copies (swap-out, swap-in, copy-on-write) ->
// flatten the scheduled chunks into a ForwardBatch -> Backend::Forward -> for each group whose
// sequences have all their known tokens computed: sample (forking n > 1 samples at the first
// token) or take a beam-search step -> detokenize and check stop conditions -> emit outputs,
// free finished sequences and groups.
//
// A request's sampling draws depend only on (seed, sample index, output position), and every
// kernel is row-local, so a request's tokens do not depend on the rest of the batch, on
// preemption, or on chunking.
#include "worker/engine/engine.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace pagellm {
namespace {

// A beam hypothesis' score; a final EOS does not count towards its length (HF).
double HypothesisScore(const SamplingParams& p, const Sequence& s) {
  const bool eos_end = s.finish_reason == FinishReason::kStop;
  return BeamScore(s.cumulative_logprob, s.num_output() - (eos_end ? 1 : 0), p.length_penalty);
}

// Best first; equal scores keep their order.
void SortHypotheses(const SamplingParams& p, std::vector<std::unique_ptr<Sequence>>* hyps) {
  std::stable_sort(hyps->begin(), hyps->end(), [&p](const auto& a, const auto& b) {
    return HypothesisScore(p, *a) > HypothesisScore(p, *b);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(Backend* backend,
                                                       const Tokenizer* tokenizer,
                                                       const EngineOptions& options) {
  if (options.max_num_batched_tokens <= 0 || options.max_num_seqs <= 0)
    return absl::InvalidArgumentError("max_num_batched_tokens and max_num_seqs must be positive");
  if (options.max_num_batched_tokens > backend->max_batch_tokens())
    return absl::InvalidArgumentError(absl::StrCat("max_num_batched_tokens ",
                                                   options.max_num_batched_tokens,
                                                   " exceeds the backend's ",
                                                   backend->max_batch_tokens()));
  std::unique_ptr<Engine> e(new Engine());
  e->backend_ = backend;
  e->tokenizer_ = tokenizer;
  e->options_ = options;
  const int64_t ctx = backend->config().max_position_embeddings;
  e->max_model_len_ = options.max_model_len > 0 ? std::min(options.max_model_len, ctx) : ctx;
  BlockManager::Options bo;
  bo.num_device_blocks = static_cast<int32_t>(backend->num_kv_blocks());
  bo.num_cpu_blocks = static_cast<int32_t>(backend->num_swap_blocks());
  bo.block_size = static_cast<int32_t>(backend->block_size());
  bo.watermark = options.watermark;
  bo.enable_prefix_caching = options.enable_prefix_caching;
  ASSIGN_OR_RETURN(e->block_manager_, BlockManager::Create(bo));
  SchedulerOptions so;
  so.max_num_batched_tokens = options.max_num_batched_tokens;
  so.max_num_seqs = options.max_num_seqs;
  so.preemption_mode = options.preemption_mode;
  e->scheduler_ = std::make_unique<Scheduler>(so, e->block_manager_.get());
  Sampler::Options sampler_options;
  sampler_options.vocab_size = backend->config().vocab_size;
  sampler_options.eos_token_ids = tokenizer->end_of_generation_ids();
  ASSIGN_OR_RETURN(e->sampler_, Sampler::Create(sampler_options));
  return e;
}

Engine::~Engine() {
  for (auto& [id, group] : groups_) scheduler_->Remove(group.get());
}

std::unique_ptr<Sequence> Engine::NewSequence(const SequenceGroup& group, int32_t sample_index,
                                              std::vector<int32_t> tokens, SamplingRng rng) {
  auto seq = std::make_unique<Sequence>();
  seq->seq_id = next_seq_id_++;
  seq->sample_index = sample_index;
  seq->prompt_len = group.seqs.empty() ? static_cast<int64_t>(tokens.size())
                                       : group.seqs.front()->prompt_len;
  seq->tokens = std::move(tokens);
  seq->tokens.reserve(seq->prompt_len + group.params.max_tokens);
  seq->rng = rng;
  if (!group.params.UseBeamSearch()) {
    seq->stop = std::make_unique<StopChecker>(group.params, tokenizer_->end_of_generation_ids());
    seq->detok = std::make_unique<StreamingDetokenizer>(tokenizer_, group.params.skip_special_tokens);
  }
  return seq;
}

absl::Status Engine::AddRequest(const std::string& request_id, std::vector<int32_t> prompt_ids,
                                const SamplingParams& params) {
  const int64_t vocab = backend_->config().vocab_size;
  if (prompt_ids.empty()) return absl::InvalidArgumentError("the prompt is empty");
  for (int32_t id : prompt_ids) {
    if (id < 0 || id >= vocab)
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", id, " outside the vocabulary of ", vocab));
  }
  RETURN_IF_ERROR(params.Validate(vocab));
  const int64_t num_seqs = params.NumSequences();
  if (num_seqs > options_.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("the request runs ", num_seqs,
                                                   " sequences; max_num_seqs is ",
                                                   options_.max_num_seqs));
  }
  if (params.UseBeamSearch() && params.beam_width > options_.max_num_batched_tokens) {
    return absl::InvalidArgumentError("beam_width exceeds max_num_batched_tokens");
  }
  const int64_t total = static_cast<int64_t>(prompt_ids.size()) + params.max_tokens;
  if (total > max_model_len_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_ids.size(), " tokens) + max_tokens (", params.max_tokens, ") = ", total,
        " exceeds the maximum model length of ", max_model_len_));
  }
  // The request must fit alone even when all its sequences are recomputed separately, or it
  // could be preempted and re-admitted forever.
  const int64_t bs = backend_->block_size();
  const int64_t blocks = num_seqs * ((total + bs - 1) / bs);
  const int64_t usable =
      backend_->num_kv_blocks() - static_cast<int64_t>(options_.watermark * backend_->num_kv_blocks());
  if (blocks > usable) {
    return absl::ResourceExhaustedError(absl::StrCat("the request needs up to ", blocks,
                                                     " KV blocks; the pool has ", usable,
                                                     " usable"));
  }
  if (groups_.contains(request_id))
    return absl::AlreadyExistsError(absl::StrCat("request id '", request_id, "' is in use"));
  auto group = std::make_unique<SequenceGroup>();
  group->request_id = request_id;
  group->arrival = next_arrival_++;
  group->params = params;
  group->max_seqs = num_seqs;
  group->seqs.push_back(
      NewSequence(*group, 0, std::move(prompt_ids), SamplingRng::ForRequest(params)));
  scheduler_->Add(group.get());
  groups_.emplace(request_id, std::move(group));
  return absl::OkStatus();
}

absl::Status Engine::Abort(const std::string& request_id) {
  auto it = groups_.find(request_id);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("no request '", request_id, "'"));
  scheduler_->Remove(it->second.get());
  groups_.erase(it);
  return absl::OkStatus();
}

void Engine::RemoveGroup(SequenceGroup* group) {
  scheduler_->Remove(group);
  groups_.erase(group->request_id);
}

std::optional<GroupState> Engine::RequestState(const std::string& request_id) const {
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
  return e;
}

std::span<const float> Engine::LogitsRow(int64_t row) const {
  const int64_t vocab = backend_->config().vocab_size;
  return std::span<const float>(logits_.data() + row * vocab, vocab);
}

void Engine::BuildBatch(const SchedulerOutput& sched) {
  const int64_t bs = backend_->block_size();
  token_ids_.clear();
  positions_.clear();
  token_seq_.clear();
  slots_.clear();
  logit_indices_.clear();
  int64_t max_blocks = 0;
  for (const ScheduledSeq& s : sched.seqs) {
    max_blocks = std::max<int64_t>(max_blocks, block_manager_->BlockTable(s.seq->seq_id).size());
  }
  block_tables_.assign(sched.seqs.size() * max_blocks, 0);
  for (size_t i = 0; i < sched.seqs.size(); ++i) {
    const Sequence& seq = *sched.seqs[i].seq;
    const std::vector<int32_t>& table = block_manager_->BlockTable(seq.seq_id);
    std::copy(table.begin(), table.end(), block_tables_.begin() + i * max_blocks);
    for (int64_t t = 0; t < sched.seqs[i].num_tokens; ++t) {
      const int64_t pos = seq.num_computed + t;
      token_ids_.push_back(seq.tokens[pos]);
      positions_.push_back(static_cast<int32_t>(pos));
      token_seq_.push_back(static_cast<int32_t>(i));
      slots_.push_back(static_cast<int64_t>(table[pos / bs]) * bs + pos % bs);
    }
    if (sched.seqs[i].sample) logit_indices_.push_back(static_cast<int32_t>(token_ids_.size() - 1));
  }
  const int64_t vocab = backend_->config().vocab_size;
  const int64_t rows = static_cast<int64_t>(logit_indices_.size());
  if (static_cast<int64_t>(logits_.size()) < rows * vocab) logits_.resize(rows * vocab);
}

absl::Status Engine::Step(std::vector<SequenceOutput>* outputs) {
  const SchedulerOutput& sched = scheduler_->Schedule();
  if (!sched.copies.empty()) backend_->CopyKv(sched.copies);
  if (sched.seqs.empty()) return absl::OkStatus();

  const BlockManager::Stats bm_stats = block_manager_->GetStats();
  peak_used_blocks_ = std::max<int64_t>(peak_used_blocks_, bm_stats.device_used);
  if (options_.collect_kv_stats && bm_stats.device_used > 0) {
    live_ratio_sum_ += static_cast<double>(block_manager_->LiveDeviceTokenSlots()) /
                       (static_cast<double>(bm_stats.device_used) * backend_->block_size());
    ++live_ratio_steps_;
  }

  BuildBatch(sched);
  ForwardBatch batch;
  batch.num_tokens = static_cast<int64_t>(token_ids_.size());
  batch.token_ids = token_ids_.data();
  batch.positions = positions_.data();
  batch.token_seq = token_seq_.data();
  batch.slots = slots_.data();
  batch.num_seqs = static_cast<int64_t>(sched.seqs.size());
  batch.block_tables = block_tables_.data();
  batch.max_blocks_per_seq =
      sched.seqs.empty() ? 0 : static_cast<int64_t>(block_tables_.size() / sched.seqs.size());
  batch.num_logits = static_cast<int64_t>(logit_indices_.size());
  batch.logit_indices = logit_indices_.data();

  absl::Status st = backend_->Forward(batch, logits_.data());
  if (!st.ok()) {
    std::vector<SequenceGroup*> failed;
    for (const ScheduledSeq& s : sched.seqs) {
      if (failed.empty() || failed.back() != s.group) failed.push_back(s.group);
    }
    for (SequenceGroup* g : failed) {
      for (const auto& seq : g->seqs) {
        SequenceOutput out;
        out.request_id = g->request_id;
        out.sample_index = seq->sample_index;
        out.finish_reason = FinishReason::kAbort;
        outputs->push_back(std::move(out));
      }
      RemoveGroup(g);
    }
    return st;
  }
  for (const ScheduledSeq& s : sched.seqs) scheduler_->OnComputed(s);

  // The scheduler lists a group's sequences together; handle one group at a time. Take the
  // list first: sampling forks and frees sequences, and finished groups are destroyed.
  sampled_.clear();
  group_spans_.clear();
  int64_t row = 0;
  for (const ScheduledSeq& s : sched.seqs) {
    if (!s.sample) continue;
    if (group_spans_.empty() || group_spans_.back().group != s.group) {
      group_spans_.push_back({s.group, sampled_.size(), 0});
    }
    sampled_.push_back({s.seq, row++});
    ++group_spans_.back().count;
  }
  for (const GroupSpan& span : group_spans_) {
    std::span<const Sampled> sampled(sampled_.data() + span.first, span.count);
    if (span.group->params.UseBeamSearch()) {
      BeamStepGroup(span.group, sampled, outputs);
    } else {
      SampleGroup(span.group, sampled, outputs);
    }
    if (span.group->seqs.empty()) RemoveGroup(span.group);
  }
  return absl::OkStatus();
}

void Engine::SampleGroup(SequenceGroup* group, std::span<const Sampled> sampled,
                         std::vector<SequenceOutput>* outputs) {
  for (const Sampled& s : sampled) {
    if (!group->forked && group->max_seqs > 1) {
      // First token of a request with n samples: the children share the computed prompt.
      Sequence* parent = s.seq;
      std::vector<Sequence*> family = {parent};
      for (int32_t i = 1; i < group->max_seqs; ++i) {
        std::unique_ptr<Sequence> child =
            NewSequence(*group, i, parent->tokens, parent->rng.ForSample(i));
        child->num_computed = parent->num_computed;
        Sequence* raw = child.get();
        absl::Status st = scheduler_->Fork(group, parent, std::move(child));
        PAGELLM_CHECK(st.ok(), "fork of request {} failed: {}", group->request_id, st.ToString());
        family.push_back(raw);
      }
      group->forked = true;
      for (Sequence* seq : family) SampleOne(group, seq, LogitsRow(s.row), outputs);
      continue;
    }
    group->forked = true;
    SampleOne(group, s.seq, LogitsRow(s.row), outputs);
  }
}

void Engine::SampleOne(SequenceGroup* group, Sequence* seq, std::span<const float> logits,
                       std::vector<SequenceOutput>* outputs) {
  SequenceToSample sts;
  sts.params = &group->params;
  sts.prompt_ids = absl::MakeConstSpan(seq->tokens.data(), seq->prompt_len);
  sts.output_ids = absl::MakeConstSpan(seq->tokens.data() + seq->prompt_len, seq->num_output());
  sts.rng = seq->rng;
  auto result = sampler_->Sample(absl::MakeConstSpan(logits.data(), logits.size()), sts);
  SequenceOutput out;
  out.request_id = group->request_id;
  out.sample_index = seq->sample_index;
  if (!result.ok()) {
    out.finish_reason = FinishReason::kAbort;
    outputs->push_back(std::move(out));
    scheduler_->FinishSequence(group, seq, /*keep=*/false);
    return;
  }
  const int32_t id = result->token_id;
  seq->tokens.push_back(id);
  ++generated_tokens_;
  out.new_token_ids.push_back(id);
  if (group->params.logprobs.has_value()) out.logprobs.push_back(*result);
  std::string delta = seq->detok->Feed(id);
  StopDecision d = seq->stop->Append(id, delta, &out.text);
  if (d.finished() && d.stop_string_index < 0) {
    // Release the bytes of an incomplete character the detokenizer still holds (as U+FFFD);
    // after a stop string the text past the match is dropped anyway.
    out.text += seq->detok->Flush();
  }
  out.finish_reason = d.finish_reason;
  outputs->push_back(std::move(out));
  if (d.finished()) scheduler_->FinishSequence(group, seq, /*keep=*/false);
}

void Engine::BeamStepGroup(SequenceGroup* group, std::span<const Sampled> sampled,
                           std::vector<SequenceOutput>* outputs) {
  const SamplingParams& p = group->params;
  const int32_t k = p.beam_width;
  PAGELLM_CHECK(sampled.size() == group->seqs.size(),
                "beam step of request {} with {} of {} beams", group->request_id, sampled.size(),
                group->seqs.size());
  std::vector<int32_t> eos;
  if (!p.ignore_eos) eos = tokenizer_->end_of_generation_ids();
  eos.insert(eos.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());

  candidates_.clear();
  for (size_t b = 0; b < sampled.size(); ++b) {
    const Sequence* seq = sampled[b].seq;
    const bool ban_eos = seq->num_output() < p.min_tokens;
    AppendBeamCandidates(LogitsRow(sampled[b].row), static_cast<int32_t>(b),
                         seq->cumulative_logprob, 2 * k,
                         ban_eos ? std::span<const int32_t>(eos) : std::span<const int32_t>(),
                         &candidates_);
  }
  const BeamStep step = SelectBeams(&candidates_, k, eos);

  // Hypotheses closed by EOS keep their tokens (EOS included) but no blocks.
  for (const BeamCandidate& c : step.finished) {
    const Sequence* parent = sampled[c.beam].seq;
    auto hyp = std::make_unique<Sequence>();
    hyp->prompt_len = parent->prompt_len;
    hyp->tokens = parent->tokens;
    hyp->tokens.push_back(c.token);
    hyp->cumulative_logprob = c.cum_logprob;
    hyp->finished = true;
    hyp->finish_reason = FinishReason::kStop;
    group->done.push_back(std::move(hyp));
  }
  SortHypotheses(p, &group->done);
  if (static_cast<int32_t>(group->done.size()) > k) group->done.resize(k);

  // New beams: the first child of a parent continues it; further children fork it (sharing its
  // blocks) before any token is appended; parents without children are dropped.
  std::vector<bool> continued(sampled.size(), false);
  std::vector<std::pair<Sequence*, const BeamCandidate*>> next;
  for (const BeamCandidate& c : step.running) {
    Sequence* parent = sampled[c.beam].seq;
    if (!continued[c.beam]) {
      continued[c.beam] = true;
      next.push_back({parent, &c});
      continue;
    }
    std::unique_ptr<Sequence> child = NewSequence(*group, 0, parent->tokens, parent->rng);
    child->num_computed = parent->num_computed;
    child->cumulative_logprob = parent->cumulative_logprob;
    Sequence* raw = child.get();
    absl::Status st = scheduler_->Fork(group, parent, std::move(child));
    PAGELLM_CHECK(st.ok(), "beam fork of request {} failed: {}", group->request_id, st.ToString());
    next.push_back({raw, &c});
  }
  for (size_t b = 0; b < sampled.size(); ++b) {
    if (!continued[b]) scheduler_->FinishSequence(group, sampled[b].seq, /*keep=*/false);
  }
  double best_cum = -std::numeric_limits<double>::infinity();
  for (auto& [seq, c] : next) {
    seq->tokens.push_back(c->token);
    seq->cumulative_logprob = c->cum_logprob;
    best_cum = std::max(best_cum, c->cum_logprob);
    ++generated_tokens_;
  }
  group->forked = true;

  const int64_t len = next.empty() ? 0 : next.front().first->num_output();
  std::vector<double> hyp_scores;
  for (const auto& h : group->done) hyp_scores.push_back(HypothesisScore(p, *h));
  if (next.empty() || len >= p.max_tokens ||
      BeamSearchDone(hyp_scores, k, p.early_stopping, best_cum, len, p.length_penalty)) {
    FinishBeams(group, outputs);
  }
}

void Engine::FinishBeams(SequenceGroup* group, std::vector<SequenceOutput>* outputs) {
  const SamplingParams& p = group->params;
  // Running beams become hypotheses too; the best beam_width are returned, best first.
  while (!group->seqs.empty()) {
    Sequence* seq = group->seqs.front().get();
    seq->finish_reason = FinishReason::kLength;
    scheduler_->FinishSequence(group, seq, /*keep=*/true);
  }
  SortHypotheses(p, &group->done);
  const size_t count = std::min<size_t>(group->done.size(), p.beam_width);
  for (size_t rank = 0; rank < count; ++rank) {
    const Sequence& s = *group->done[rank];
    SequenceOutput out;
    out.request_id = group->request_id;
    out.sample_index = static_cast<int32_t>(rank);
    out.new_token_ids.assign(s.tokens.begin() + s.prompt_len, s.tokens.end());
    out.text = tokenizer_->Decode(out.new_token_ids, p.skip_special_tokens);
    out.finish_reason = s.finish_reason;
    out.cumulative_logprob = s.cumulative_logprob;
    outputs->push_back(std::move(out));
  }
}

}  // namespace pagellm
