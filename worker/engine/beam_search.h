// Beam search selection, with the semantics of Hugging Face transformers' beam search (which
// vLLM v0 follows): each step takes the 2k best (beam, token) continuations by cumulative
// logprob; walking them best first, an end-of-sequence token ranked within the first k closes a
// hypothesis, any other token extends a running beam, until k beams run. A hypothesis scores
// cumulative_logprob / generated_length ^ length_penalty, the length not counting its final EOS.
//
// Pure functions over candidates and numbers: the backend computes each beam's top candidates
// (SamplingRow::num_top_candidates), the engine owns the sequences, forks and frees them.
// Thread-compatible.
#ifndef PAGELLM_WORKER_ENGINE_BEAM_SEARCH_H_
#define PAGELLM_WORKER_ENGINE_BEAM_SEARCH_H_

#include <cstdint>
#include <span>
#include <vector>

namespace pagellm {

struct BeamCandidate {
  int32_t beam = 0;  // index of the parent beam in this step
  int32_t token = -1;
  double cum_logprob = 0.0;  // parent's cumulative logprob + the token's logprob
};

struct BeamStep {
  std::vector<BeamCandidate> running;   // up to k new beams, best first
  std::vector<BeamCandidate> finished;  // hypotheses closed by an EOS token this step
};

// Sorts all beams' candidates (score descending; ties: beam, then token) and splits the best 2k
// into new running beams and finished hypotheses. `candidates` is reordered.
BeamStep SelectBeams(std::vector<BeamCandidate>* candidates, int32_t k,
                     std::span<const int32_t> eos_ids);

// The score that ranks finished hypotheses.
double BeamScore(double cum_logprob, int64_t generated_len, double length_penalty);

// True when the search can stop: k hypotheses have finished and either early_stopping is set or
// the best running beam (its cumulative logprob, generated length) cannot beat the worst one.
bool BeamSearchDone(std::span<const double> hypothesis_scores, int32_t k, bool early_stopping,
                    double best_running_cum, int64_t running_len, double length_penalty);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_BEAM_SEARCH_H_
