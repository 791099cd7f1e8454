// Flags every pagellm tool shares for choosing a model: --model, --load-format, --tokenizer,
// --dummy-model, --dummy-dtype, --threads.
#ifndef PAGELLM_WORKER_FLAGS_MODEL_FLAGS_H_
#define PAGELLM_WORKER_FLAGS_MODEL_FLAGS_H_

#include "worker/model/model_loader.h"

namespace pagellm::cli {

// The LoadModelOptions the flags describe (format "mock" is not a file format: callers check
// IsMockModelFromFlags first).
LoadModelOptions ModelOptionsFromFlags();
// True for --load-format mock: no model, a byte tokenizer, the mock backend.
bool IsMockModelFromFlags();
// --threads (0: all hardware threads).
int ThreadsFromFlags();

}  // namespace pagellm::cli

#endif  // PAGELLM_WORKER_FLAGS_MODEL_FLAGS_H_
