#include "router/http/score_response.h"

#include <algorithm>
#include <cmath>

#include "nlohmann/json.hpp"

namespace pagellm {

ScoreResponse::ScoreResponse(Config config)
    : config_(std::move(config)), embeddings_({.inputs = config_.inputs}) {}

double ScoreResponse::Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return 0.0;
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (aa == 0 || bb == 0 || !std::isfinite(dot)) return 0.0;
  return dot / std::sqrt(aa * bb);
}

std::string ScoreResponse::Body() const {
  using Json = nlohmann::ordered_json;
  std::vector<double> scores;
  for (const auto& [a, b] : config_.pairs) {
    scores.push_back(Cosine(embeddings_.embedding(a), embeddings_.embedding(b)));
  }
  const int64_t tokens = embeddings_.prompt_tokens();
  Json out;
  if (!config_.rerank) {
    out = {{"id", config_.id},
           {"object", "list"},
           {"created", config_.created},
           {"model", config_.model}};
    Json data = Json::array();
    for (size_t k = 0; k < scores.size(); ++k) {
      data.push_back({{"index", k}, {"object", "score"}, {"score", scores[k]}});
    }
    out["data"] = std::move(data);
    out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}, {"completion_tokens", 0}};
  } else {
    std::vector<size_t> order(scores.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return scores[x] > scores[y]; });
    if (config_.top_n > 0 && order.size() > static_cast<size_t>(config_.top_n)) {
      order.resize(config_.top_n);
    }
    out = {{"id", config_.id},
           {"model", config_.model},
           {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
    Json results = Json::array();
    for (size_t k : order) {
      results.push_back(
          {{"index", k},
           {"document",
            {{"text", k < config_.documents.size() ? config_.documents[k] : std::string()}}},
           {"relevance_score", scores[k]}});
    }
    out["results"] = std::move(results);
  }
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace pagellm
