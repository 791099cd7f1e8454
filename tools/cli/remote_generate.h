// RemoteGenerate: `pagellm generate --server host:port`. Streams every prompt to a pagellm router
// (pagellm.v1.Generation) at once, one call each, and collects the completions.
#ifndef PAGELLM_TOOLS_CLI_REMOTE_GENERATE_H_
#define PAGELLM_TOOLS_CLI_REMOTE_GENERATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pagellm/v1/generation.pb.h"
#include "tools/cli/completion.h"

namespace pagellm::cli {

// Each prompt is sent with `sampling` (the fields it leaves unset take the model's defaults
// there). `done` holds `per_prompt` completions per prompt (the request's samples or beams),
// (prompt, sample) order; they are filled in place. With `stream` (one prompt, one sample) text
// is written to stdout as it arrives. Returns the first failed call's status (prefixed with its
// prompt index).
absl::Status RemoteGenerate(const std::string& server, const std::vector<std::string>& prompts,
                            const v1::SamplingParams& sampling, int32_t per_prompt, bool stream,
                            std::vector<Completion>* done);

}  // namespace pagellm::cli

#endif  // PAGELLM_TOOLS_CLI_REMOTE_GENERATE_H_
