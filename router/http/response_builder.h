// ResponseBuilder: builds one OpenAI endpoint's answer from the GenerateResponse messages of
// each of the request's prompts. OpenAiResponse answers completions and chat (streamed or not);
// EmbeddingResponse answers embeddings (never streamed). The frontend's Generation drives it:
//   streamed:     AppendStart once, Append(prompt, message, &events) per message, AppendError
//                 when a prompt failed after the stream began, AppendEnd;
//   not streamed: Append(prompt, message, nullptr) per message, then Body() once every prompt is
//                 done; Reset(prompt) when a prompt starts over on another worker.
//
// Not thread-safe: one request's messages are given in order by one caller at a time.
#ifndef PAGELLM_ROUTER_HTTP_RESPONSE_BUILDER_H_
#define PAGELLM_ROUTER_HTTP_RESPONSE_BUILDER_H_

#include <string>

#include "absl/status/status.h"
#include "pagellm/v1/generation.pb.h"

namespace pagellm {

class ResponseBuilder {
 public:
  virtual ~ResponseBuilder() = default;
  virtual void AppendStart(std::string* out) = 0;
  // `out` null: not streamed (accumulate).
  virtual void Append(int prompt, const v1::GenerateResponse& response, std::string* out) = 0;
  virtual void Reset(int prompt) = 0;
  // The stream failed with `status` (not OK) after it began; AppendEnd follows.
  virtual void AppendError(const absl::Status& status, std::string* out) = 0;
  virtual void AppendEnd(std::string* out) = 0;
  [[nodiscard]] virtual std::string Body() const = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_RESPONSE_BUILDER_H_
