#include "router/http/score_response.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::json;

void Feed(ScoreResponse& r, const std::vector<std::vector<float>>& embeddings,
          const std::vector<int>& tokens) {
  for (size_t i = 0; i < embeddings.size(); ++i) {
    v1::GenerateResponse m;
    m.mutable_embedding()->Add(embeddings[i].begin(), embeddings[i].end());
    r.Append(static_cast<int>(i), m, nullptr);
    v1::GenerateResponse last;
    last.set_finished(true);
    last.mutable_usage()->set_prompt_tokens(tokens[i]);
    r.Append(static_cast<int>(i), last, nullptr);
  }
}

TEST(ScoreResponseTest, CosineIsOfTheDirectionsOnly) {
  EXPECT_DOUBLE_EQ(ScoreResponse::Cosine({1, 0}, {0, 2}), 0.0);
  EXPECT_DOUBLE_EQ(ScoreResponse::Cosine({3, 4}, {6, 8}), 1.0);
  EXPECT_NEAR(ScoreResponse::Cosine({1, 1}, {1, 0}), 1 / std::sqrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(ScoreResponse::Cosine({0, 0}, {1, 0}), 0.0) << "a zero vector";
  EXPECT_DOUBLE_EQ(ScoreResponse::Cosine({1}, {1, 0}), 0.0) << "sizes differ";
  EXPECT_DOUBLE_EQ(ScoreResponse::Cosine({}, {}), 0.0);
}

TEST(ScoreResponseTest, ScoresComeInPairOrderWithVllmsFields) {
  // text_1 (input 0) against text_2 = inputs 1 and 2.
  ScoreResponse r(
      {.id = "score-1", .created = 5, .model = "m", .inputs = 3, .pairs = {{0, 1}, {0, 2}}});
  Feed(r, {{1, 0}, {0.6f, 0.8f}, {-1, 0}}, {7, 5, 4});
  const Json j = Json::parse(r.Body());
  EXPECT_EQ(j["id"], "score-1");
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["created"], 5);
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0]["index"], 0);
  EXPECT_EQ(j["data"][0]["object"], "score");
  EXPECT_NEAR(j["data"][0]["score"].get<double>(), 0.6, 1e-6);
  EXPECT_NEAR(j["data"][1]["score"].get<double>(), -1.0, 1e-6);
  EXPECT_EQ(j["usage"],
            Json({{"prompt_tokens", 16}, {"total_tokens", 16}, {"completion_tokens", 0}}));
}

TEST(ScoreResponseTest, RerankPutsTheBestDocumentsFirstAndKeepsTopN) {
  ScoreResponse::Config c{.id = "rerank-1",
                          .model = "m",
                          .inputs = 5,
                          .pairs = {{0, 1}, {0, 2}, {0, 3}, {0, 4}},
                          .rerank = true,
                          .documents = {"a", "b", "c", "d"},
                          .top_n = 3};
  ScoreResponse r(c);
  // Query (1, 0); documents at cosines 0, 0.8, 0.8, -0.6.
  Feed(r, {{1, 0}, {0, 1}, {0.8f, 0.6f}, {0.8f, -0.6f}, {-0.6f, 0.8f}}, {3, 1, 1, 1, 1});
  const Json j = Json::parse(r.Body());
  EXPECT_EQ(j["id"], "rerank-1");
  EXPECT_EQ(j["usage"], Json({{"prompt_tokens", 7}, {"total_tokens", 7}}));
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["index"], 1) << "ties go to the lower index";
  EXPECT_EQ(j["results"][0]["document"]["text"], "b");
  EXPECT_NEAR(j["results"][0]["relevance_score"].get<double>(), 0.8, 1e-6);
  EXPECT_EQ(j["results"][1]["index"], 2);
  EXPECT_EQ(j["results"][2]["index"], 0);
  c.top_n = 0;  // all
  ScoreResponse all(c);
  Feed(all, {{1, 0}, {0, 1}, {0.8f, 0.6f}, {0.8f, -0.6f}, {-0.6f, 0.8f}}, {3, 1, 1, 1, 1});
  EXPECT_EQ(Json::parse(all.Body())["results"].size(), 4u);
}

}  // namespace
}  // namespace pagellm
