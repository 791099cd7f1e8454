// Why a sequence stopped generating; shared by the engine, the worker and the router.
#ifndef PAGELLM_COMMON_SAMPLING_FINISH_REASON_H_
#define PAGELLM_COMMON_SAMPLING_FINISH_REASON_H_

#include <string_view>

namespace pagellm {

enum class FinishReason {
  kNone,    // Still generating.
  kStop,    // EOS, a stop token or a stop string.
  kLength,  // max_tokens reached.
  kAbort,   // Cancelled or failed; set by the engine, never by StopChecker.
};

// Returns the OpenAI/vLLM name: "stop", "length", "abort"; "" for kNone.
std::string_view FinishReasonName(FinishReason reason);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_SAMPLING_FINISH_REASON_H_
