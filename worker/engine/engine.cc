// One step: Schedule() -> flatten the scheduled chunks into a ForwardBatch -> Backend::Forward
// -> sample one token for each sequence whose known tokens are now all computed -> detokenize
// and check stop conditions -> emit outputs, free finished sequences.
//
// A request's sampling draws depend only on (seed, output position), and every kernel is
// row-local, so a request's tokens do not depend on the rest of the batch.
#include "worker/engine/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm {

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
  SchedulerOptions so;
  so.block_size = backend->block_size();
  so.max_num_batched_tokens = options.max_num_batched_tokens;
  so.max_num_seqs = options.max_num_seqs;
  e->scheduler_ = std::make_unique<Scheduler>(so, &backend->allocator());
  Sampler::Options sampler_options;
  sampler_options.vocab_size = backend->config().vocab_size;
  sampler_options.eos_token_ids = tokenizer->end_of_generation_ids();
  ASSIGN_OR_RETURN(e->sampler_, Sampler::Create(sampler_options));
  return e;
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
  const int64_t total = static_cast<int64_t>(prompt_ids.size()) + params.max_tokens;
  if (total > max_model_len_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt_ids.size(), " tokens) + max_tokens (", params.max_tokens, ") = ", total,
        " exceeds the maximum model length of ", max_model_len_));
  }
  const int64_t blocks = scheduler_->BlocksFor(total);
  if (blocks > backend_->allocator().num_blocks() * 99 / 100) {
    return absl::ResourceExhaustedError(absl::StrCat("the request needs ", blocks,
                                                     " KV blocks; the pool has ",
                                                     backend_->allocator().num_blocks()));
  }
  if (sequences_.contains(request_id))
    return absl::AlreadyExistsError(absl::StrCat("request id '", request_id, "' is in use"));
  auto seq = std::make_unique<Sequence>();
  seq->request_id = request_id;
  seq->arrival = next_arrival_++;
  seq->params = params;
  seq->rng = SamplingRng::ForRequest(params);
  seq->prompt_len = static_cast<int64_t>(prompt_ids.size());
  seq->tokens = std::move(prompt_ids);
  seq->tokens.reserve(total);
  seq->stop = std::make_unique<StopChecker>(seq->params, tokenizer_->end_of_generation_ids());
  seq->detok = std::make_unique<StreamingDetokenizer>(tokenizer_, params.skip_special_tokens);
  scheduler_->Add(seq.get());
  sequences_.emplace(request_id, std::move(seq));
  return absl::OkStatus();
}

absl::Status Engine::Abort(const std::string& request_id) {
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return absl::NotFoundError(absl::StrCat("no request '", request_id, "'"));
  scheduler_->Remove(it->second.get());
  sequences_.erase(it);
  return absl::OkStatus();
}

void Engine::Finish(Sequence* seq) {
  scheduler_->Remove(seq);
  sequences_.erase(seq->request_id);
}

absl::Status Engine::Step(std::vector<SequenceOutput>* outputs) {
  const std::vector<ScheduledSeq>& sched = scheduler_->Schedule();
  stats_.preemptions = scheduler_->stats().preemptions;
  if (sched.empty()) return absl::OkStatus();
  ++stats_.steps;
  const int64_t bs = backend_->block_size();
  const int64_t vocab = backend_->config().vocab_size;

  token_ids_.clear();
  positions_.clear();
  token_seq_.clear();
  slots_.clear();
  logit_indices_.clear();
  int64_t max_blocks = 0;
  for (const ScheduledSeq& s : sched) max_blocks = std::max<int64_t>(max_blocks, s.seq->block_table.size());
  block_tables_.assign(sched.size() * max_blocks, 0);
  for (size_t i = 0; i < sched.size(); ++i) {
    const Sequence& seq = *sched[i].seq;
    std::copy(seq.block_table.begin(), seq.block_table.end(), block_tables_.begin() + i * max_blocks);
    for (int64_t t = 0; t < sched[i].num_tokens; ++t) {
      const int64_t pos = seq.num_computed + t;
      token_ids_.push_back(seq.tokens[pos]);
      positions_.push_back(static_cast<int32_t>(pos));
      token_seq_.push_back(static_cast<int32_t>(i));
      slots_.push_back(static_cast<int64_t>(seq.block_table[pos / bs]) * bs + pos % bs);
    }
    if (sched[i].sample) logit_indices_.push_back(static_cast<int32_t>(token_ids_.size() - 1));
  }
  ForwardBatch batch;
  batch.num_tokens = static_cast<int64_t>(token_ids_.size());
  batch.token_ids = token_ids_.data();
  batch.positions = positions_.data();
  batch.token_seq = token_seq_.data();
  batch.slots = slots_.data();
  batch.num_seqs = static_cast<int64_t>(sched.size());
  batch.block_tables = block_tables_.data();
  batch.max_blocks_per_seq = max_blocks;
  batch.num_logits = static_cast<int64_t>(logit_indices_.size());
  batch.logit_indices = logit_indices_.data();
  if (static_cast<int64_t>(logits_.size()) < batch.num_logits * vocab) logits_.resize(batch.num_logits * vocab);

  const int64_t used = backend_->allocator().num_blocks() - backend_->allocator().num_free();
  stats_.peak_used_blocks = std::max(stats_.peak_used_blocks, used);

  absl::Status st = backend_->Forward(batch, logits_.data());
  if (!st.ok()) {
    std::vector<Sequence*> failed;
    for (const ScheduledSeq& s : sched) failed.push_back(s.seq);
    for (Sequence* seq : failed) {
      outputs->push_back({seq->request_id, {}, "", {}, FinishReason::kAbort});
      Finish(seq);
    }
    return st;
  }

  std::vector<Sequence*> finished;
  int64_t row = 0;
  for (const ScheduledSeq& s : sched) {
    Sequence* seq = s.seq;
    const int64_t prompt_part = std::max<int64_t>(0, std::min(seq->prompt_len, seq->num_computed + s.num_tokens) - seq->num_computed);
    stats_.computed_prompt_tokens += prompt_part;
    seq->num_computed += s.num_tokens;
    if (!s.sample) continue;
    SequenceToSample sts;
    sts.params = &seq->params;
    sts.prompt_ids = absl::MakeConstSpan(seq->tokens.data(), seq->prompt_len);
    sts.output_ids = absl::MakeConstSpan(seq->tokens.data() + seq->prompt_len, seq->num_output());
    sts.rng = seq->rng;
    auto result = sampler_->Sample(absl::MakeConstSpan(logits_.data() + row * vocab, vocab), sts);
    ++row;
    SequenceOutput out;
    out.request_id = seq->request_id;
    if (!result.ok()) {
      out.finish_reason = FinishReason::kAbort;
      outputs->push_back(std::move(out));
      finished.push_back(seq);
      continue;
    }
    const int32_t id = result->token_id;
    seq->tokens.push_back(id);
    ++stats_.generated_tokens;
    out.new_token_ids.push_back(id);
    if (seq->params.logprobs.has_value()) out.logprobs.push_back(*result);
    std::string delta = seq->detok->Feed(id);
    StopDecision d = seq->stop->Append(id, delta, &out.text);
    if (d.finished() && d.stop_string_index < 0) {
      // Release the bytes of an incomplete character the detokenizer still holds (as U+FFFD);
      // after a stop string the text past the match is dropped anyway.
      out.text += seq->detok->Flush();
    }
    out.finish_reason = d.finish_reason;
    if (d.finished()) finished.push_back(seq);
    outputs->push_back(std::move(out));
  }
  for (Sequence* seq : finished) Finish(seq);
  return absl::OkStatus();
}

}  // namespace pagellm
