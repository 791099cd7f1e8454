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
  return cum_logprob /
         std::pow(static_cast<double>(std::max<int64_t>(generated_len, 1)), length_penalty);
}

bool BeamSearchDone(std::span<const double> hypothesis_scores, int32_t k, bool early_stopping,
                    double best_running_cum, int64_t running_len, double length_penalty) {
  if (static_cast<int32_t>(hypothesis_scores.size()) < k) return false;
  if (early_stopping) return true;
  const double worst = *std::min_element(hypothesis_scores.begin(), hypothesis_scores.end());
  return worst >= BeamScore(best_running_cum, running_len, length_penalty);
}

}  // namespace pagellm
