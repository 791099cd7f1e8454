// EmbeddingResponse: the answer of one POST /v1/embeddings request, as OpenAI and vLLM give it:
//   {"id": "embd-...", "object": "list", "created", "model",
//    "data": [{"object": "embedding", "index": i, "embedding": [floats] or "base64"}],
//    "usage": {"prompt_tokens", "total_tokens"}}
// from the worker's messages of each input (GenerateResponse.embedding, and the usage of the
// last). Floats are written in the shortest form that reads back as the same fp32 value; base64
// is the little-endian fp32 bytes (numpy.frombuffer(..., dtype="float32"), as the openai SDKs
// decode it). Never streamed (AppendStart and AppendEnd write nothing).
//
// Not thread-safe (see response_builder.h).
#ifndef PAGELLM_ROUTER_HTTP_EMBEDDING_RESPONSE_H_
#define PAGELLM_ROUTER_HTTP_EMBEDDING_RESPONSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "router/http/response_builder.h"

namespace pagellm {

class EmbeddingResponse final : public ResponseBuilder {
 public:
  struct Config {
    std::string id = {};     // "embd-..."
    int64_t created = 0;     // Unix seconds
    std::string model = {};  // as the client named it
    int inputs = 1;
    bool base64 = false;
  };
  explicit EmbeddingResponse(Config config);

  void AppendStart(std::string* out) override {}
  void Append(int input, const v1::GenerateResponse& response, std::string* out) override;
  void Reset(int input) override;
  void AppendError(const absl::Status&, std::string*) override {}  // never streamed
  void AppendEnd(std::string* out) override {}
  // REQUIRES: every input's messages were appended. An input without an embedding (which a
  // worker never leaves) is written as an empty list.
  [[nodiscard]] std::string Body() const override;

  // What was appended: input i's embedding (empty until it came), and the inputs' prompt tokens.
  [[nodiscard]] const std::vector<float>& embedding(int input) const { return embeddings_[input]; }
  [[nodiscard]] int64_t prompt_tokens() const;

 private:
  const Config config_;
  std::vector<std::vector<float>> embeddings_;  // per input
  std::vector<int64_t> prompt_tokens_;          // per input, from the last message's usage
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_EMBEDDING_RESPONSE_H_
