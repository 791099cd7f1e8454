#include "worker/engine/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagellm {
namespace {

bool Better(const BeamCandidate& a, const BeamCandidate& b) {
  if (a.cum_logprob != b.cum_logprob) return a.cum_logprob > b.cum_logprob;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

bool Contains(std::span<const int32_t> ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

void AppendBeamCandidates(std::span<const float> logits, int32_t beam, double cum_logprob,
                          int32_t count, std::span<const int32_t> banned,
                          std::vector<BeamCandidate>* out) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = max_logit + std::log(sum);

  // Partial selection of the `count` largest logits (ties to the lower id): a heap at the end of
  // `out` whose top is the worst kept candidate (Better as the "less than" puts it on top).
  const size_t base = out->size();
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (!banned.empty() && Contains(banned, id)) continue;
    const BeamCandidate c{beam, id, static_cast<double>(logits[id])};
    const size_t have = out->size() - base;
    if (have == static_cast<size_t>(count) && !Better(c, (*out)[base])) continue;
    if (have == static_cast<size_t>(count)) {
      std::pop_heap(out->begin() + base, out->end(), Better);
      out->back() = c;
    } else {
      out->push_back(c);
    }
    std::push_heap(out->begin() + base, out->end(), Better);
  }
  for (size_t i = base; i < out->size(); ++i) {
    (*out)[i].cum_logprob = cum_logprob + ((*out)[i].cum_logprob - log_z);
  }
}

BeamStep SelectBeams(std::vector<BeamCandidate>* candidates, int32_t k,
                     std::span<const int32_t> eos_ids) {
  std::sort(candidates->begin(), candidates->end(), Better);
  BeamStep step;
  const size_t limit = std::min<size_t>(candidates->size(), 2 * static_cast<size_t>(k));
  for (size_t rank = 0; rank < limit && static_cast<int32_t>(step.running.size()) < k; ++rank) {
    const BeamCandidate& c = (*candidates)[rank];
    if (Contains(eos_ids, c.token)) {
      if (rank < static_cast<size_t>(k)) step.finished.push_back(c);
    } else {
      step.running.push_back(c);
    }
  }
  return step;
}

double BeamScore(double cum_logprob, int64_t generated_len, double length_penalty) {
  return cum_logprob / std::pow(static_cast<double>(std::max<int64_t>(generated_len, 1)),
                                length_penalty);
}

bool BeamSearchDone(std::span<const double> hypothesis_scores, int32_t k, bool early_stopping,
                    double best_running_cum, int64_t running_len, double length_penalty) {
  if (static_cast<int32_t>(hypothesis_scores.size()) < k) return false;
  if (early_stopping) return true;
  const double worst = *std::min_element(hypothesis_scores.begin(), hypothesis_scores.end());
  return worst >= BeamScore(best_running_cum, running_len, length_penalty);
}

}  // namespace pagellm
