#include "router/http/embedding_response.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::json;

v1::GenerateResponse EmbeddingMessage(std::vector<float> values) {
  v1::GenerateResponse m;
  m.mutable_embedding()->Add(values.begin(), values.end());
  return m;
}

v1::GenerateResponse LastMessage(int prompt_tokens) {
  v1::GenerateResponse m;
  m.set_finished(true);
  m.mutable_usage()->set_prompt_tokens(prompt_tokens);
  return m;
}

EmbeddingResponse::Config TwoInputs(bool base64) {
  EmbeddingResponse::Config c;
  c.id = "embd-1";
  c.created = 1700000000;
  c.model = "m";
  c.inputs = 2;
  c.base64 = base64;
  return c;
}

TEST(EmbeddingResponseTest, FloatsComeInInputOrderInTheirShortestForm) {
  EmbeddingResponse r(TwoInputs(false));
  // Messages arrive in any order across inputs; an input's message carries its index.
  r.Append(1, EmbeddingMessage({0.25f, -1.0f}), nullptr);
  r.Append(0, EmbeddingMessage({0.1f, NAN}), nullptr);
  r.Append(1, LastMessage(7), nullptr);
  r.Append(0, LastMessage(3), nullptr);
  const std::string body = r.Body();
  EXPECT_NE(body.find("[0.1,0]"), std::string::npos) << body;  // not 0.10000000149011612
  const Json j = Json::parse(body);
  EXPECT_EQ(j["id"], "embd-1");
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][0]["embedding"][0].get<float>(), 0.1f);  // reads back as the same fp32
  EXPECT_EQ(j["data"][0]["embedding"][1], 0) << "JSON has no NaN";
  EXPECT_EQ(j["data"][1]["embedding"], Json::array({0.25, -1.0}));
  EXPECT_EQ(j["usage"], Json({{"prompt_tokens", 10}, {"total_tokens", 10}}));
}

TEST(EmbeddingResponseTest, Base64IsTheLittleEndianFloat32Bytes) {
  EmbeddingResponse r(TwoInputs(true));
  r.Append(0, EmbeddingMessage({1.0f, -2.0f, 0.1f}), nullptr);
  r.Append(1, EmbeddingMessage({}), nullptr);
  const Json j = Json::parse(r.Body());
  // Python: base64.b64encode(struct.pack("<3f", 1.0, -2.0, 0.1)).
  EXPECT_EQ(j["data"][0]["embedding"], "AACAPwAAAMDNzMw9");
  EXPECT_EQ(j["data"][1]["embedding"], "");
}

TEST(EmbeddingResponseTest, AnInputThatStartsOverForgetsWhatItHad) {
  EmbeddingResponse r(TwoInputs(false));
  r.Append(0, EmbeddingMessage({1.0f}), nullptr);
  r.Append(0, LastMessage(4), nullptr);
  r.Reset(0);
  r.Append(0, EmbeddingMessage({0.5f}), nullptr);
  r.Append(0, LastMessage(4), nullptr);
  r.Append(5, EmbeddingMessage({9.0f}), nullptr);  // no such input: ignored
  const Json j = Json::parse(r.Body());
  EXPECT_EQ(j["data"][0]["embedding"], Json::array({0.5}));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
}

}  // namespace
}  // namespace pagellm
