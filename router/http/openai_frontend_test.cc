// The OpenAI-compatible HTTP API end to end: a RouterServer with its HTTP port in front of
// in-process fake workers, called over real sockets by a small Beast client. What a request
// produces is compared with the gRPC API's answer to the same request.
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagellm/v1/generation.grpc.pb.h"
#include "router/http/openai_request.h"
#include "router/router_server.h"
#include "router/testing/fake_worker.h"

namespace pagellm {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Json = nlohmann::json;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::WaitFor;

struct HttpResult {
  int status = 0;
  std::string body;
  std::string content_type;
};

// One request on a new connection.
HttpResult Call(int port, http::verb method, const std::string& target,
                const std::string& body = "", const std::string& authorization = "") {
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port)));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  beast::error_code ec;
  http::read(socket, buffer, parser, ec);
  HttpResult out;
  if (ec) return out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = parser.get().body();
  out.content_type = std::string(parser.get()[http::field::content_type]);
  return out;
}

HttpResult Post(int port, const std::string& target, const Json& body) {
  return Call(port, http::verb::post, target, body.dump());
}

// The JSON of each "data: " event of a server-sent event stream; "[DONE]" as a string.
std::vector<Json> Events(const std::string& body) {
  std::vector<Json> out;
  for (absl::string_view event : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(event, "data: ")) << event;
    absl::string_view data = event.substr(6);
    out.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
  }
  return out;
}

class OpenAiFrontendTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (router_ != nullptr) router_->Shutdown(absl::ZeroDuration());
  }

  FakeWorker& AddWorker(FakeWorker::Options o = {}) {
    workers_.push_back(FakeWorker::Start(std::move(o)));
    return *workers_.back();
  }

  void StartRouter(size_t max_queue = 1024, size_t max_body = 1 << 20,
                   std::shared_ptr<ReloadableSecrets> keys = nullptr,
                   OpenAiFrontend::Options openai = {}) {
    RouterServer::Options o;
    o.openai = std::move(openai);
    o.api_keys = std::move(keys);
    o.listen_address = "127.0.0.1:0";
    for (const auto& w : workers_) o.workers.addresses.push_back(w->address());
    o.poll_interval = absl::Milliseconds(20);
    o.request_timeout = absl::Seconds(20);
    o.max_queue = max_queue;
    o.http.port = 0;
    o.http.max_body_bytes = max_body;
    o.allow_runtime_lora_updating = runtime_lora_;
    auto r = RouterServer::Start(std::move(o));
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = *std::move(r);
    ASSERT_GT(router_->http_port(), 0);
    stub_ = v1::Generation::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", router_->port()),
                                                        grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(WaitFor([&] { return router_->serving(); }));
  }

  // The text the gRPC API streams for `request`.
  std::string GrpcText(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    auto reader = stub_->Generate(&context, request);
    std::string text;
    v1::GenerateResponse m;
    while (reader->Read(&m)) {
      for (const auto& d : m.deltas()) text += d.text();
    }
    EXPECT_TRUE(reader->Finish().ok());
    return text;
  }

  int port() const { return router_->http_port(); }

  bool runtime_lora_ = false;  // RouterServer::Options::allow_runtime_lora_updating
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

TEST_F(OpenAiFrontendTest, CompletionHasTheGrpcTextAndUsage) {
  AddWorker();
  StartRouter();
  v1::GenerateRequest g;
  g.set_text("hello");
  g.mutable_sampling()->set_max_tokens(6);
  g.mutable_sampling()->set_temperature(0);
  const std::string expected = GrpcText(g);
  ASSERT_FALSE(expected.empty());

  HttpResult r =
      Post(port(), "/v1/completions",
           {{"model", "fake-model"}, {"prompt", "hello"}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_TRUE(absl::StartsWith(j["id"].get<std::string>(), "cmpl-"));
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], expected);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6) << "<s> + 5 byte tokens";
  EXPECT_EQ(j["usage"]["total_tokens"], 12);
}

TEST_F(OpenAiFrontendTest, StreamedCompletionIsServerSentEventsEndingWithDone) {
  AddWorker();
  StartRouter();
  HttpResult r = Post(port(), "/v1/completions",
                      {{"prompt", "hello"},
                       {"max_tokens", 5},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  std::vector<Json> events = Events(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const Json& usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) text += events[i]["choices"][0]["text"];
  EXPECT_EQ(text, "abcde") << "the fake worker's tokens";
  EXPECT_EQ(events[events.size() - 3]["choices"][0]["finish_reason"], "length");
}

TEST_F(OpenAiFrontendTest, ChatStreamStartsWithTheAssistantRole) {
  FakeWorker::Options o;
  o.info = FakeWorker::DefaultInfo();
  o.info.set_chat_template(
      "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
      "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  AddWorker(o);
  StartRouter();
  HttpResult r = Post(
      port(), "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<Json> events = Events(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    text += events[i]["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, "abc");

  r = Post(port(), "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][1]["message"]["content"], "abc");
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
}

TEST_F(OpenAiFrontendTest, ChatTemplateKwargsReachTheTemplate) {
  FakeWorker::Options o;
  o.info = FakeWorker::DefaultInfo();
  o.info.set_chat_template(
      "{% if enable_thinking is defined and not enable_thinking %}/no_think {% endif %}"
      "{{ messages[0]['content'] }}");
  AddWorker(o);
  StartRouter();
  auto prompt_tokens = [&](const Json& kwargs) {
    Json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}};
    if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
    HttpResult r = Post(port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["usage"].value("prompt_tokens", -1);
  };
  const int plain = prompt_tokens(nullptr);
  // One byte token per character of "/no_think " (the fake vocabulary is byte-level).
  EXPECT_EQ(prompt_tokens({{"enable_thinking", false}}), plain + 10);
  EXPECT_EQ(prompt_tokens({{"enable_thinking", true}}), plain);

  HttpResult r = Post(port(), "/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                       {"chat_template_kwargs", {{"messages", Json::array()}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("may not set 'messages'"));
}

// Mistral's [TOOL_CALLS] is a control token: "auto" replies keep special tokens to be read.
TEST_F(OpenAiFrontendTest, MistralAutoToolChoiceKeepsSpecialTokens) {
  FakeWorker::Options o;
  o.info = FakeWorker::DefaultInfo();
  o.info.set_chat_template("{{ messages[0]['content'] }}");
  FakeWorker& worker = AddWorker(o);
  OpenAiFrontend::Options openai;
  openai.tool_call_format = ToolCallFormat::kMistral;
  StartRouter(1024, 1 << 20, nullptr, openai);
  for (const char* choice : {"auto", "none"}) {
    HttpResult r = Post(port(), "/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                         {"max_tokens", 1},
                         {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
                         {"tool_choice", choice}});
    EXPECT_EQ(r.status, 200) << r.body;
  }
  const std::vector<v1::WorkerGenerateRequest> seen = worker.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].sampling().has_skip_special_tokens());
  EXPECT_FALSE(seen[0].sampling().skip_special_tokens());
  EXPECT_FALSE(seen[1].sampling().has_skip_special_tokens());  // "none": the default
}

TEST_F(OpenAiFrontendTest, SeveralPromptsGetChoicesInPromptOrder) {
  AddWorker();
  StartRouter();
  HttpResult r =
      Post(port(), "/v1/completions", {{"prompt", {"a", "b", "c"}}, {"max_tokens", 2}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6) << "three prompts of <s> + 1 byte";
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
}

TEST_F(OpenAiFrontendTest, ErrorsComeAsOpenAiErrorObjectsWithTheirStatus) {
  AddWorker();
  StartRouter(/*max_queue=*/1024, /*max_body=*/1 << 20);
  struct Case {
    std::string name;
    http::verb method;
    std::string target;
    std::string body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", http::verb::post, "/v1/completions", "{\"prompt\": ", 400,
       "not valid JSON"},
      {"wrong type", http::verb::post, "/v1/completions", R"({"prompt": 5})", 400,
       "prompt must be"},
      {"validation by the router", http::verb::post, "/v1/completions",
       R"({"prompt": "hi", "max_tokens": 100})", 400, "exceeds the maximum model length of 64"},
      {"temperature out of range", http::verb::post, "/v1/completions",
       R"({"prompt": "hi", "temperature": -1})", 400, "temperature"},
      {"token outside the vocabulary", http::verb::post, "/v1/completions",
       R"({"prompt": [1, 99999]})", 400, "outside the vocabulary"},
      {"unknown model", http::verb::post, "/v1/completions",
       R"({"model": "gpt-4", "prompt": "hi"})", 404, "does not exist"},
      {"unknown endpoint", http::verb::post, "/v1/responses", "{}", 404, "no route"},
      {"wrong method", http::verb::get, "/v1/completions", "", 405, "takes POST"},
      {"chat without a template", http::verb::post, "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}]})", 400, "template"},
      {"tools with no parser for \"auto\"", http::verb::post, "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}],
           "tools": [{"type": "function", "function": {"name": "f"}}]})",
       400, "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser"},
      {"body over the limit", http::verb::post, "/v1/completions",
       absl::StrCat(R"({"prompt": ")", std::string(2 << 20, 'a'), R"("})"), 413,
       "larger than the limit"},
      // More than the limit and the sockets' buffers hold: the client, which writes the whole
      // body before it reads, still gets the answer (the server drains what was declared).
      {"body far over the limit", http::verb::post, "/v1/completions",
       absl::StrCat(R"({"prompt": ")", std::string(48 << 20, 'a'), R"("})"), 413,
       "larger than the limit"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    HttpResult r = Call(port(), c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    Json j = Json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << r.body;
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(c.message));
    EXPECT_TRUE(j["error"].contains("type"));
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
  }
  // A streamed request refused before any output gets its status too, not 200.
  HttpResult r =
      Post(port(), "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 100}, {"stream", true}});
  EXPECT_EQ(r.status, 400) << r.body;
}

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
    socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port())));
    http::request<http::string_body> req{http::verb::post, "/v1/embeddings", 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
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

TEST_F(OpenAiFrontendTest, FullQueueIs429AndNoReadyWorkerIs503) {
  FakeWorker& w = AddWorker();
  StartRouter(/*max_queue=*/1);
  w.SetLoad(testing::Load(/*free=*/0));     // nothing fits: requests wait in the queue
  absl::SleepFor(absl::Milliseconds(100));  // the router polls the new load
  std::thread waiting([&] {
    Post(port(), "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  });
  ASSERT_TRUE(WaitFor([&] { return router_->queue_length() == 1; }));
  HttpResult r = Post(port(), "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 429) << r.body;
  w.SetLoad(FakeWorker::DefaultLoad());
  waiting.join();

  w.Kill();
  ASSERT_TRUE(WaitFor([&] { return !router_->serving(); }));
  r = Post(port(), "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Call(port(), http::verb::get, "/health").status, 503);
}

TEST_F(OpenAiFrontendTest, PromptLargerThanEveryWorkersCacheIs400NotRetryable429) {
  FakeWorker::Options o;
  o.load = testing::Load(/*free=*/2, /*total=*/2);  // 2 blocks of 4 tokens
  AddWorker(o);
  StartRouter();
  HttpResult r =
      Post(port(), "/v1/completions",
           {{"prompt", Json::array({97, 97, 97, 97, 97, 97, 97, 97, 97, 97})}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("more than any worker has"));
}

TEST_F(OpenAiFrontendTest, ModelsHealthAndVersion) {
  AddWorker();
  StartRouter();
  HttpResult r = Call(port(), http::verb::get, "/v1/models");
  ASSERT_EQ(r.status, 200);
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], FakeWorker::DefaultInfo().model_name());
  EXPECT_EQ(j["data"][0]["max_model_len"], 64);
  EXPECT_EQ(Call(port(), http::verb::get, "/health").status, 200);
  r = Call(port(), http::verb::get, "/version");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(Json::parse(r.body)["version"].get<std::string>().empty());
}

TEST_F(OpenAiFrontendTest, LoraAdaptersAreModelsOfTheirOwn) {
  // As vLLM: each adapter the workers serve is a model card whose parent is the base model; a
  // request naming it runs with it (and hears its name back); other names are 404.
  FakeWorker::Options o;
  o.info.add_lora_adapters("sql-lora");
  o.info.add_lora_adapters("chat-lora");
  FakeWorker& worker = AddWorker(o);
  StartRouter();
  HttpResult r = Call(port(), http::verb::get, "/v1/models");
  ASSERT_EQ(r.status, 200);
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["data"].size(), 3u);
  const std::string base = FakeWorker::DefaultInfo().model_name();
  EXPECT_EQ(j["data"][0]["id"], base);
  EXPECT_EQ(j["data"][0]["parent"], nullptr);
  EXPECT_EQ(j["data"][1]["id"], "sql-lora");
  EXPECT_EQ(j["data"][1]["parent"], base);
  EXPECT_EQ(j["data"][2]["id"], "chat-lora");

  for (const char* model : {"sql-lora", "fake-model", ""}) {
    Json body = {{"prompt", "hello"}, {"max_tokens", 2}};
    if (*model != '\0') body["model"] = model;
    r = Post(port(), "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json::parse(r.body)["model"], *model == '\0' ? base : model);
  }
  r = Post(port(), "/v1/chat/completions",
           {{"model", "chat-lora"},
            {"messages", {{{"role", "user"}, {"content", "hi"}}}},
            {"max_tokens", 1}});
  // The fake model has no chat template: refused, but not as an unknown model.
  EXPECT_NE(r.status, 404) << r.body;
  const std::vector<v1::WorkerGenerateRequest> seen = worker.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].sampling().lora_adapter(), "sql-lora");
  EXPECT_EQ(seen[1].sampling().lora_adapter(), "");
  EXPECT_EQ(seen[2].sampling().lora_adapter(), "");

  r = Post(port(), "/v1/completions", {{"model", "sql"}, {"prompt", "hello"}});
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(Post(port(), "/tokenize", {{"model", "chat-lora"}, {"prompt", "hi"}}).status, 200);
  EXPECT_EQ(Post(port(), "/tokenize", {{"model", "other"}, {"prompt", "hi"}}).status, 404);
}

TEST_F(OpenAiFrontendTest, RuntimeLoraUpdatingIsOffByDefault) {
  AddWorker();
  StartRouter();
  const HttpResult r =
      Post(port(), "/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "sql"}});
  EXPECT_EQ(r.status, 404) << r.body;  // as vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING
  EXPECT_EQ(Post(port(), "/v1/unload_lora_adapter", {{"lora_name", "sql"}}).status, 404);
}

TEST_F(OpenAiFrontendTest, RuntimeLoraAdaptersLoadOnEveryWorkerAndUnload) {
  FakeWorker& a = AddWorker();
  FakeWorker& b = AddWorker();
  runtime_lora_ = true;
  StartRouter();
  HttpResult r = Post(port(), "/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "p"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' added successfully.");  // vLLM's words
  EXPECT_THAT(r.content_type, HasSubstr("text/plain"));
  // Listed, and served by both workers at once (no poll needed).
  r = Call(port(), http::verb::get, "/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body)["data"][1]["id"], "sql");
  for (int i = 0; i < 4; ++i) {
    r = Post(port(), "/v1/completions", {{"model", "sql"}, {"prompt", "hi"}, {"max_tokens", 1}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  for (FakeWorker* w : {&a, &b}) {
    for (const auto& seen : w->requests()) EXPECT_EQ(seen.sampling().lora_adapter(), "sql");
  }
  EXPECT_EQ(a.requests().size() + b.requests().size(), 4u);

  // Refusals: loaded already (vLLM: 400), not an adapter (every worker refuses: said so), the
  // base model's name, malformed bodies, the wrong method.
  r = Post(port(), "/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "p"}});
  EXPECT_EQ(r.status, 400) << r.body;
  // A refused change leaves the router's view of the workers as it was.
  r = Post(port(), "/v1/completions", {{"model", "sql"}, {"prompt", "hi"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 200) << r.body;
  r = Post(port(), "/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", "bad"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("2 of 2 workers refused"));
  const std::string base = FakeWorker::DefaultInfo().model_name();
  r = Post(port(), "/v1/load_lora_adapter", {{"lora_name", base}, {"lora_path", "p"}});
  EXPECT_EQ(r.status, 400) << r.body;
  for (const Json& body : {Json{{"lora_name", "y"}}, Json{{"lora_path", "p"}},
                           Json{{"lora_name", "a b"}, {"lora_path", "p"}},
                           Json{{"lora_name", "y"}, {"lora_path", "p"}, {"load_inplace", true}},
                           Json{{"lora_name", "y"}, {"lora_path", "p"}, {"extra", 1}}}) {
    r = Post(port(), "/v1/load_lora_adapter", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " " << r.body;
  }
  EXPECT_EQ(Call(port(), http::verb::get, "/v1/load_lora_adapter").status, 405);

  r = Post(port(), "/v1/unload_lora_adapter", {{"lora_name", "sql"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' removed successfully.");
  r = Post(port(), "/v1/completions", {{"model", "sql"}, {"prompt", "hi"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 404) << r.body;
  r = Post(port(), "/v1/unload_lora_adapter", {{"lora_name", "sql"}});
  EXPECT_EQ(r.status, 404) << r.body;
}

TEST_F(OpenAiFrontendTest, ClientThatDisconnectsCancelsItsWorkerStream) {
  FakeWorker::Options o;
  o.token_interval = absl::Milliseconds(50);
  FakeWorker& w = AddWorker(o);
  StartRouter();
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port())));
  http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.body() = R"({"prompt": "hi", "max_tokens": 60, "stream": true, "ignore_eos": true})";
  req.prepare_payload();
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response_parser<http::empty_body> parser;
  http::read_header(socket, buffer, parser);
  EXPECT_EQ(parser.get().result_int(), 200u);
  ASSERT_TRUE(WaitFor([&] { return w.active_streams() == 1; }));
  const absl::Time closed = absl::Now();
  socket.close();
  ASSERT_TRUE(w.WaitForCancellations(1, absl::Seconds(5)));
  EXPECT_LT(absl::Now() - closed, absl::Seconds(1));
  EXPECT_EQ(w.completed(), 0);
}

// A worker that dies mid-answer: a request that is not streamed starts over on another worker
// (its client saw nothing of the first attempt) and gets the whole answer, once; a streamed
// one, whose client has seen tokens, ends with an error event.
TEST_F(OpenAiFrontendTest, WorkerDeathMidAnswerIsRetriedElsewhereUnlessStreamed) {
  FakeWorker::Options slow;
  slow.token_interval = absl::Milliseconds(100);
  slow.load = testing::Load(1000);
  FakeWorker& a = AddWorker(slow);
  FakeWorker::Options other;
  other.load = testing::Load(500);  // fewer free blocks: the router prefers a
  FakeWorker& b = AddWorker(other);
  StartRouter();
  HttpResult r;
  std::thread client([&] {
    r = Post(port(), "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 8}, {"echo", true}});
  });
  ASSERT_TRUE(WaitFor([&] { return a.tokens_sent() >= 3; }));
  a.Kill();
  client.join();
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], "helloabcdefgh") << "echoed once, then b's 8 tokens";
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(a.generate_calls(), 1);
  EXPECT_EQ(b.generate_calls(), 1);

  a.Restart();
  b.SetLoad(testing::Load(10));
  ASSERT_TRUE(WaitFor([&] { return router_->worker_stats().ready == 2; }));
  const int64_t sent = a.tokens_sent();
  std::thread streamed([&] {
    r = Post(port(), "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 8}, {"stream", true}});
  });
  ASSERT_TRUE(WaitFor([&] { return a.tokens_sent() >= sent + 3; }));
  a.Kill();
  streamed.join();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"error\"")) << "the stream's last event before [DONE]";
  EXPECT_EQ(b.generate_calls(), 1) << "no retry for a streamed answer";
}

TEST_F(OpenAiFrontendTest, ApiKeysGuardBothApisAndCanBeReplacedWhileServing) {
  AddWorker();
  auto keys = std::make_shared<ReloadableSecrets>();
  absl::StatusOr<SecretSet> set = SecretSet::FromList({"key-1", "key-2"});
  ASSERT_TRUE(set.ok());
  keys->Set(*std::move(set));
  StartRouter(1024, 1 << 20, keys);
  const std::string body = R"({"prompt": "hi", "max_tokens": 2})";
  auto http_status = [&](const std::string& authorization) {
    return Call(port(), http::verb::post, "/v1/completions", body, authorization).status;
  };
  auto grpc_code = [&](const std::string& key) {
    grpc::ClientContext context;
    if (!key.empty()) context.AddMetadata("authorization", "Bearer " + key);
    v1::GenerateRequest g;
    g.set_text("hi");
    g.mutable_sampling()->set_max_tokens(2);
    auto reader = stub_->Generate(&context, g);
    v1::GenerateResponse m;
    while (reader->Read(&m)) {
    }
    return reader->Finish().error_code();
  };
  EXPECT_EQ(http_status(""), 401);
  EXPECT_EQ(http_status("Bearer key-3"), 401);
  EXPECT_EQ(http_status("Basic key-1"), 401);
  EXPECT_EQ(http_status("Bearer key-1"), 200);
  EXPECT_EQ(Call(port(), http::verb::get, "/v1/models", "", "Bearer key-2").status, 200);
  EXPECT_EQ(Call(port(), http::verb::get, "/v1/models").status, 401);
  EXPECT_EQ(Call(port(), http::verb::get, "/health").status, 200) << "probes need no key";
  for (const char* path : {"/v1/embeddings", "/v1/score", "/score", "/v1/rerank", "/rerank"}) {
    EXPECT_EQ(Call(port(), http::verb::post, path, "{}").status, 401) << path;
  }
  EXPECT_EQ(grpc_code(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(grpc_code("key-3"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(grpc_code("key-2"), grpc::StatusCode::OK);

  set = SecretSet::FromList({"key-2"});  // key-1 revoked
  ASSERT_TRUE(set.ok());
  keys->Set(*std::move(set));
  EXPECT_EQ(http_status("Bearer key-1"), 401);
  EXPECT_EQ(grpc_code("key-1"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(http_status("Bearer key-2"), 200);
}

TEST_F(OpenAiFrontendTest, KeepAliveConnectionServesSeveralRequests) {
  AddWorker();
  StartRouter();
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), static_cast<uint16_t>(port())));
  beast::flat_buffer buffer;
  for (int i = 0; i < 3; ++i) {
    http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = R"({"prompt": "hi", "max_tokens": 2, "stream": true})";
    req.prepare_payload();
    http::write(socket, req);
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    EXPECT_EQ(res.result_int(), 200u);
    EXPECT_TRUE(absl::EndsWith(res.body(), "data: [DONE]\n\n"));
  }
  EXPECT_EQ(router_->worker_stats().ready, 1);
}

}  // namespace
}  // namespace pagellm
