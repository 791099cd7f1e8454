// ScoreResponse: the answer of POST /v1/score or POST /v1/rerank, vLLM's scoring APIs for an
// embedding model: each pair's score is the cosine similarity of its two texts' embeddings.
//   score:  {"id": "score-...", "object": "list", "created", "model",
//            "data": [{"index": k, "object": "score", "score"}],
//            "usage": {"prompt_tokens", "total_tokens", "completion_tokens": 0}}
//   rerank: {"id": "rerank-...", "model", "usage": {"prompt_tokens", "total_tokens"},
//            "results": [{"index": document, "document": {"text"}, "relevance_score"}]}, best
//            first (ties: lower index first), the first top_n (0: all).
// The texts' embeddings come in as an EmbeddingResponse's inputs do (each text once); usage
// counts each embedded text once. Never streamed.
//
// Not thread-safe (see response_builder.h).
#ifndef PAGELLM_ROUTER_HTTP_SCORE_RESPONSE_H_
#define PAGELLM_ROUTER_HTTP_SCORE_RESPONSE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "router/http/embedding_response.h"
#include "router/http/response_builder.h"

namespace pagellm {

class ScoreResponse final : public ResponseBuilder {
 public:
  struct Config {
    std::string id = {};
    int64_t created = 0;
    std::string model = {};
    int inputs = 0;                               // texts embedded
    std::vector<std::pair<int, int>> pairs = {};  // input indices, one score each
    bool rerank = false;
    std::vector<std::string> documents = {};  // rerank: pair k's document text
    int top_n = 0;
  };
  explicit ScoreResponse(Config config);

  void AppendStart(std::string* out) override {}
  void Append(int input, const v1::GenerateResponse& response, std::string* out) override {
    embeddings_.Append(input, response, out);
  }
  void Reset(int input) override { embeddings_.Reset(input); }
  void AppendError(const absl::Status&, std::string*) override {}  // never streamed
  void AppendEnd(std::string* out) override {}
  [[nodiscard]] std::string Body() const override;

  // The cosine similarity of two vectors (0 when either is zero or they differ in size).
  static double Cosine(const std::vector<float>& a, const std::vector<float>& b);

 private:
  const Config config_;
  EmbeddingResponse embeddings_;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_SCORE_RESPONSE_H_
