// Helpers shared by the LlamaWeights loaders (internal to worker/model).
#ifndef PAGELLM_WORKER_MODEL_LLAMA_WEIGHTS_COMMON_H_
#define PAGELLM_WORKER_MODEL_LLAMA_WEIGHTS_COMMON_H_

#include <string>

#include "absl/status/status.h"
#include "worker/model/llama_weights.h"

namespace pagellm::internal {

// Checks that `w` is n_out x n_in with a usable type; InvalidArgument naming `name` otherwise.
absl::Status CheckMatrix(const Matrix& w, int64_t n_out, int64_t n_in, const std::string& name);

// Checks every layer's shapes against the config and fills lm_head from the embedding when
// tied. Called by every loader once tensors are in place.
absl::Status FinishWeights(LlamaWeights* w);

}  // namespace pagellm::internal

#endif  // PAGELLM_WORKER_MODEL_LLAMA_WEIGHTS_COMMON_H_
