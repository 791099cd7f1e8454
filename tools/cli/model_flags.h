// Flags every pagellm tool shares for choosing a model and the CPU backend:
// --model, --load-format, --tokenizer, --dummy-model, --dummy-dtype, --threads.
#ifndef PAGELLM_TOOLS_CLI_MODEL_FLAGS_H_
#define PAGELLM_TOOLS_CLI_MODEL_FLAGS_H_

#include "worker/model/model_loader.h"

namespace pagellm::cli {

// The LoadModelOptions the flags describe.
LoadModelOptions ModelOptionsFromFlags();
// --threads (0: all hardware threads).
int ThreadsFromFlags();

}  // namespace pagellm::cli

#endif  // PAGELLM_TOOLS_CLI_MODEL_FLAGS_H_
