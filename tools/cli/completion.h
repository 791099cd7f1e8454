// Completion: everything one (prompt, sample) produced, as `pagellm generate` prints it, whether
// it ran in-process or through a router.
#ifndef PAGELLM_TOOLS_CLI_COMPLETION_H_
#define PAGELLM_TOOLS_CLI_COMPLETION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/sampling/finish_reason.h"
#include "worker/backend/sampling_batch.h"

namespace pagellm::cli {

struct Completion {
  size_t prompt_index = 0;
  int32_t sample_index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<SampleResult> logprobs;
  // --prompt-logprobs, on sample 0: prompt tokens 1, 2, ... given the tokens before each.
  std::vector<SampleResult> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
  double cumulative_logprob = 0.0;
  std::vector<float> embedding;  // --embed: the prompt's embedding
};

}  // namespace pagellm::cli

#endif  // PAGELLM_TOOLS_CLI_COMPLETION_H_
