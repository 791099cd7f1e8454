// What the engine returns from a request's prompt rather than from sampling: prompt logprobs
// (one scoring row per prompt position, filled while the prompt is computed, chunk by chunk) and
// embeddings (the last prompt token's final hidden state, L2-normalized, which ends the request).
#include <algorithm>
#include <cmath>

#include "common/logging.h"
#include "worker/engine/engine.h"

namespace pagellm {

void Engine::AddScoringRows(const ScheduledSeq& s, int32_t row_start, GroupSpan* span) {
  const Sequence& seq = *s.seq;
  // Position p's logits give the logprob of prompt token p + 1. The scheduler never skips a
  // position still to score (no cached prefix is reused while the prompt is scored).
  const int64_t first = seq.num_computed;
  const int64_t from = std::max(first, s.group->next_prompt_logprob - 1);
  const int64_t to = std::min(first + s.num_tokens, seq.prompt_len - 1);
  PAGELLM_CHECK(first <= s.group->next_prompt_logprob - 1 || from >= to,
                "request {} computes from position {} but scores from {}", s.group->request_id,
                first, s.group->next_prompt_logprob);
  if (from >= to) return;
  span->first_scored = static_cast<int32_t>(sampling_rows_.size());
  span->num_scored = static_cast<int32_t>(to - from);
  SamplingRow row;
  row.seq.params = &s.group->params;
  for (int64_t p = from; p < to; ++p) {
    row.logits_row = static_cast<int32_t>(logit_indices_.size());
    logit_indices_.push_back(row_start + static_cast<int32_t>(p - first));
    row.score_token = seq.tokens[p + 1];
    sampling_rows_.push_back(row);
  }
}

bool Engine::EmitPromptLogprobs(const GroupSpan& span, std::vector<SequenceOutput>* outputs) {
  SequenceGroup* group = span.group;
  SequenceOutput out;
  out.request_id = group->request_id;
  for (int32_t i = 0; i < span.num_scored; ++i) {
    const SampledRow& row = sampled_rows_.rows[span.first_scored + i];
    if (!row.status.ok()) {  // e.g. NaN logits: the request ends with the error
      out.prompt_logprobs.clear();
      out.finish_reason = FinishReason::kAbort;
      out.error = row.status;
      outputs->push_back(std::move(out));
      result_.finishes.push_back({group, group->seqs.front().get(), /*keep=*/false});
      return false;
    }
    out.prompt_logprobs.push_back(row.result);
  }
  group->next_prompt_logprob += span.num_scored;
  outputs->push_back(std::move(out));
  return true;
}

void Engine::EmitEmbeddings(std::vector<SequenceOutput>* outputs) {
  const int64_t hs = backend_->config().hidden_size;
  hidden_.resize(embed_rows_.size() * hs);
  const absl::Status st = backend_->FinalHidden(embed_logits_rows_, hidden_.data());
  for (size_t i = 0; i < embed_rows_.size(); ++i) {
    const EmbedRow& e = embed_rows_[i];
    SequenceOutput out;
    out.request_id = e.group->request_id;
    const float* h = hidden_.data() + i * hs;
    double sum = 0;
    for (int64_t j = 0; st.ok() && j < hs; ++j) sum += static_cast<double>(h[j]) * h[j];
    if (st.ok() && std::isfinite(sum)) {
      // As vLLM's pooler (torch's normalize, eps 1e-12): a zero vector stays zero.
      const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
      out.embedding.resize(hs);
      for (int64_t j = 0; j < hs; ++j) out.embedding[j] = static_cast<float>(h[j] * scale);
      out.finish_reason = FinishReason::kStop;
    } else {  // as a row the sampler cannot sample: the request fails alone
      out.finish_reason = FinishReason::kAbort;
      out.error = st.ok() ? absl::FailedPreconditionError("the hidden state is not finite") : st;
    }
    outputs->push_back(std::move(out));
    result_.finishes.push_back({e.group, e.seq, /*keep=*/false});
  }
}

}  // namespace pagellm
