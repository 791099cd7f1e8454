// The OpenAI-compatible HTTP API end to end (router/http/testing/openai_http_fixture.h):
// /v1/embeddings and vLLM's /v1/score and /v1/rerank over the fake workers' embeddings.
#include <string>
#include <vector>

#include "router/http/testing/openai_http_fixture.h"

namespace pagellm::openai_test {
namespace {

// Decodes standard base64 (the test's own, independent of the router's encoder).
std::string FromBase64(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : in) {
    if (c == '=') break;
    bits = (bits << 6) | static_cast<uint32_t>(kAlphabet.find(c));
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

TEST_F(OpenAiFrontendTest, EmbeddingsComeInInputOrderAsFloatsOrBase64) {
  FakeWorker& w = AddWorker();
  StartRouter();
  // The fake worker's embedding of a prompt: {its length, the sum of its ids, 0.5}. A text
  // input gets <s> (256) first.
  const std::vector<std::vector<float>> want = {
      {1, 97, 0.5f}, {2, 197, 0.5f}, {3, 256 + 240, 0.5f}};
  for (const bool base64 : {false, true}) {
    SCOPED_TRACE(base64 ? "base64" : "float");
    Json body = {{"model", "fake-model"}, {"input", {{97}, {98, 99}}}};
    if (base64) body["encoding_format"] = "base64";
    HttpResult r = Post(port(), "/v1/embeddings", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    Json j = Json::parse(r.body);
    EXPECT_EQ(j["object"], "list");
    EXPECT_EQ(j["model"], "fake-model");
    EXPECT_TRUE(absl::StartsWith(j["id"].get<std::string>(), "embd-"));
    ASSERT_EQ(j["data"].size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const Json& d = j["data"][i];
      EXPECT_EQ(d["object"], "embedding");
      EXPECT_EQ(d["index"], i);
      std::vector<float> got;
      if (base64) {
        const std::string bytes = FromBase64(d["embedding"].get<std::string>());
        ASSERT_EQ(bytes.size(), 3 * sizeof(float));
        got.resize(3);
        std::memcpy(got.data(), bytes.data(), bytes.size());
      } else {
        got = d["embedding"].get<std::vector<float>>();
      }
      EXPECT_EQ(got, want[i]);
    }
    EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
    EXPECT_EQ(j["usage"]["total_tokens"], 3);
  }
  HttpResult r = Post(port(), "/v1/embeddings", {{"input", "xx"}});  // one text input
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["data"][0]["embedding"].get<std::vector<float>>(), want[2]);
  const std::vector<v1::WorkerGenerateRequest> seen = w.requests();
  ASSERT_FALSE(seen.empty());
  for (const auto& req : seen) EXPECT_TRUE(req.sampling().embed());
}

TEST_F(OpenAiFrontendTest, EmbeddingRequestsAreRefusedClearly) {
  AddWorker();
  StartRouter();
  struct Case {
    std::string name;
    Json body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no input", Json::object(), 400, "input is required"},
      {"empty input", {{"input", Json::array()}}, 400, "input is an empty array"},
      {"input past the context",
       {{"input", std::vector<int>(65, 97)}},
       400,
       "the input (65 tokens) exceeds the maximum model length of 64"},
      {"too many inputs",
       {{"input", std::vector<std::string>(kMaxEmbeddingInputs + 1, "a")}},
       400,
       "the limit is 2048"},
      {"dimensions", {{"input", "a"}, {"dimensions", 2}}, 400, "matryoshka"},
      {"encoding", {{"input", "a"}, {"encoding_format", "int8"}}, 400, "encoding_format"},
      {"a generation field", {{"input", "a"}, {"temperature", 0.5}}, 400, "temperature"},
      {"unknown model",
       {{"input", "a"}, {"model", "text-embedding-3-small"}},
       404,
       "does not exist"},
      {"priority under fcfs", {{"input", "a"}, {"priority", 1}}, 400, "priority"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    HttpResult r = Post(port(), "/v1/embeddings", c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    Json j = Json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(c.message));
  }
  EXPECT_EQ(Call(port(), http::verb::get, "/v1/embeddings").status, 405);
}

TEST_F(OpenAiFrontendTest, ManyEmbeddingInputsAreOpenAFewHundredAtATime) {
  FakeWorker::Options o;
  o.first_token_delay = absl::Milliseconds(20);  // calls overlap
  FakeWorker& w = AddWorker(o);
  StartRouter();
  const int n = 700;
  std::vector<std::vector<int>> inputs;
  for (int i = 0; i < n; ++i) inputs.push_back({97 + i % 20});
  HttpResult r = Post(port(), "/v1/embeddings", {{"input", inputs}});
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 500);
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["data"].size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(j["data"][i]["index"], i);
    EXPECT_EQ(j["data"][i]["embedding"][1], 97 + i % 20) << i;
  }
  EXPECT_EQ(w.completed(), n);
  EXPECT_LE(w.max_concurrent_streams(), 256);
  EXPECT_GT(w.max_concurrent_streams(), 16);
  EXPECT_EQ(router_->queue_length(), 0);
}

// Of a large embedding request, the inputs not yet opened are never opened once it cannot
// succeed: a client that leaves cancels the open ones and nothing more reaches a worker; a
// failed input ends the request with its error (no hang) and the router serves on.
TEST_F(OpenAiFrontendTest, ALargeEmbeddingRequestLeftOrFailedOpensNoMoreInputs) {
  FakeWorker::Options o;
  o.fail_every = 300;  // the 300th call fails
  o.fail_code = grpc::StatusCode::INVALID_ARGUMENT;
  FakeWorker& w = AddWorker(o);
  StartRouter();
  std::vector<std::vector<int>> inputs(700, std::vector<int>{97});
  const std::string body = Json({{"input", inputs}}).dump();

  w.SetStall(true);  // streams send nothing until cancelled
  {
    net::io_context ioc;
    tcp::socket socket(ioc);
    Send(socket, port(), http::verb::post, "/v1/embeddings", body);
    ASSERT_TRUE(w.WaitForActiveStreams(256, absl::Seconds(10)));
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(w.active_streams(), 256) << "at most 256 inputs open at once";
    socket.close();
  }
  ASSERT_TRUE(w.WaitForCancellations(256, absl::Seconds(5)));
  ASSERT_TRUE(WaitFor([&] { return w.active_streams() == 0; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(w.generate_calls(), 256) << "the 444 inputs never opened stay so";

  w.SetStall(false);
  HttpResult r = Call(port(), http::verb::post, "/v1/embeddings", body);
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);  // call 300 overall failed
  EXPECT_THAT(r.body, HasSubstr("fake failure"));
  EXPECT_LT(w.generate_calls(), 256 + 300 + 256);
  r = Post(port(), "/v1/embeddings", {{"input", {{97}, {98}}}});
  EXPECT_EQ(r.status, 200) << r.body;
}

// vLLM's scoring APIs over an embedding model: each pair's score is the cosine of the two texts'
// embeddings (the fake worker's: {length, sum of ids, 0.5}; a text gets <s> = 256 first).
TEST_F(OpenAiFrontendTest, ScoreAndRerankAreCosinesOfTheEmbeddings) {
  FakeWorker& w = AddWorker();
  StartRouter();
  auto cosine = [](std::vector<double> a, std::vector<double> b) {
    double d = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      d += a[i] * b[i];
      aa += a[i] * a[i];
      bb += b[i] * b[i];
    }
    return d / std::sqrt(aa * bb);
  };
  const std::vector<double> q = {2, 256 + 97, 0.5}, d1 = {3, 256 + 2 * 98, 0.5},
                            d2 = {2, 256 + 99, 0.5};
  HttpResult r = Post(port(), "/v1/score",
                      {{"model", "fake-model"}, {"text_1", "a"}, {"text_2", {"bb", "c"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  EXPECT_TRUE(absl::StartsWith(j["id"].get<std::string>(), "score-"));
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "fake-model");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_NEAR(j["data"][0]["score"].get<double>(), cosine(q, d1), 1e-6);
  EXPECT_NEAR(j["data"][1]["score"].get<double>(), cosine(q, d2), 1e-6);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7) << "the query embedded once";
  EXPECT_EQ(w.generate_calls(), 3);

  ASSERT_LT(cosine(q, d1), cosine(q, d2));
  r = Post(port(), "/rerank", {{"query", "a"}, {"documents", {"bb", "c"}}, {"top_n", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = Json::parse(r.body);
  EXPECT_TRUE(absl::StartsWith(j["id"].get<std::string>(), "rerank-"));
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["index"], 1);
  EXPECT_EQ(j["results"][0]["document"]["text"], "c");
  EXPECT_NEAR(j["results"][0]["relevance_score"].get<double>(), cosine(q, d2), 1e-6);

  r = Post(port(), "/v1/rerank", {{"query", "a"}, {"documents", "bb"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("documents must be an array of strings"));
  EXPECT_EQ(Call(port(), http::verb::get, "/v1/score").status, 405);
}

}  // namespace
}  // namespace pagellm::openai_test
