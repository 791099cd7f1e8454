// ResumedOutput: what a request had generated on a worker that died mid-stream, for the worker
// that goes on with it (Engine::AddRequest; the router's failover, WorkerGenerateRequest's
// resumed_output_token_ids and resumed_samples).
#ifndef PAGELLM_WORKER_ENGINE_RESUMED_OUTPUT_H_
#define PAGELLM_WORKER_ENGINE_RESUMED_OUTPUT_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace pagellm {

struct ResumedOutput {
  struct Sample {
    std::vector<int32_t> tokens;  // what it generated there (its client has them)
    bool finished = false;        // it ended there: it does not run again
  };
  // One entry per sample, in sample order; none for a request that is not resumed.
  std::vector<Sample> samples;

  // One sample's tokens (none: not resumed).
  static ResumedOutput OneSample(std::vector<int32_t> tokens) {
    ResumedOutput r;
    if (!tokens.empty()) r.samples.push_back({std::move(tokens), false});
    return r;
  }
  [[nodiscard]] bool empty() const { return samples.empty(); }
  // Over all samples, finished ones included.
  [[nodiscard]] int64_t tokens() const {
    int64_t n = 0;
    for (const Sample& s : samples) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_RESUMED_OUTPUT_H_
