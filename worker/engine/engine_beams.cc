// The engine's beam-search step: SelectBeams over each beam's top candidates -> hypotheses closed
// by EOS, beams continued or forked (sharing their parent's blocks) -> the search ends by length,
// by BeamSearchDone, or when no beam is left; EmitBeams returns the best hypotheses.
#include <algorithm>
#include <limits>

#include "common/logging.h"
#include "worker/engine/engine.h"

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

void Engine::BeamStepGroup(SequenceGroup* group, std::span<const Sampled> sampled,
                           std::vector<SequenceOutput>* outputs) {
  const SamplingParams& p = group->params;
  const int32_t k = p.beam_width;
  PAGELLM_CHECK(sampled.size() == group->seqs.size(), "beam step of request {} with {} of {} beams",
                group->request_id, sampled.size(), group->seqs.size());
  for (const Sampled& s : sampled) {
    if (const absl::Status& failed = sampled_rows_.rows[s.first_row].status; !failed.ok()) {
      // The backend could not score this beam: the search ends with nothing to return.
      group->done.clear();
      for (const Sampled& b : sampled) {
        SequenceOutput out;
        out.request_id = group->request_id;
        out.sample_index = b.seq->sample_index;
        out.finish_reason = FinishReason::kAbort;
        out.error = failed;
        outputs->push_back(std::move(out));
        result_.finishes.push_back({group, b.seq, /*keep=*/false});
      }
      return;
    }
  }
  std::vector<int32_t> eos;
  if (!p.ignore_eos) eos = eos_ids_;
  eos.insert(eos.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());

  candidates_.clear();
  for (size_t b = 0; b < sampled.size(); ++b) {
    const double cum = sampled[b].seq->cumulative_logprob;
    const SampledRow& row = sampled_rows_.rows[sampled[b].first_row];
    for (const TopCandidate& c : sampled_rows_.CandidatesOf(row)) {
      candidates_.push_back({static_cast<int32_t>(b), c.token_id, cum + c.logprob});
    }
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
    child->cumulative_logprob = parent->cumulative_logprob;
    Sequence* raw = child.get();
    result_.forks.push_back({group, parent, std::move(child)});
    next.push_back({raw, &c});
  }
  for (size_t b = 0; b < sampled.size(); ++b) {
    if (!continued[b]) result_.finishes.push_back({group, sampled[b].seq, /*keep=*/false});
  }
  double best_cum = -std::numeric_limits<double>::infinity();
  for (auto& [seq, c] : next) {
    result_.appends.push_back({seq, c->token});
    seq->cumulative_logprob = c->cum_logprob;
    best_cum = std::max(best_cum, c->cum_logprob);
    ++generated_tokens_;
  }

  // Output length once this step's tokens are appended.
  const int64_t len = next.empty() ? 0 : next.front().first->num_output() + 1;
  std::vector<double> hyp_scores;
  for (const auto& h : group->done) hyp_scores.push_back(HypothesisScore(p, *h));
  if (next.empty() || len >= p.max_tokens ||
      BeamSearchDone(hyp_scores, k, p.early_stopping, best_cum, len, p.length_penalty)) {
    // Running beams become hypotheses too; EmitBeams returns the best once they are in.
    for (auto& [seq, c] : next) {
      seq->finish_reason = FinishReason::kLength;
      result_.finishes.push_back({group, seq, /*keep=*/true});
    }
  }
}

void Engine::EmitBeams(SequenceGroup* group, std::vector<SequenceOutput>* outputs) {
  const SamplingParams& p = group->params;
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
