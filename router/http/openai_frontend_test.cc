// The OpenAI-compatible HTTP API end to end (router/http/testing/openai_http_fixture.h):
// completions and chat against the gRPC API's answers, errors, queueing, models, disconnects,
// retries, API keys and keep-alive.
#include <string>
#include <vector>

#include "router/http/testing/openai_http_fixture.h"

namespace pagellm::openai_test {
namespace {

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

// What a request leaves unset reaches the worker filled in: a chat reply's max_tokens (the rest
// of the model length, not the worker's 16) and the model's default sampling parameters.
TEST_F(OpenAiFrontendTest, TheWorkerGetsWhatTheRequestLeftUnsetFilledIn) {
  FakeWorker::Options o;
  o.info = FakeWorker::DefaultInfo();  // max_model_len 64
  o.info.set_chat_template(
      "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
      "{% if add_generation_prompt %}assistant: {% endif %}");
  o.info.mutable_default_sampling()->set_temperature(0.6f);  // the model's generation_config
  o.info.mutable_default_sampling()->set_top_p(0.9f);
  o.tokens_per_request = 3;
  FakeWorker& w = AddWorker(o);
  StartRouter();
  HttpResult r = Post(port(), "/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"top_p", 0.5}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_FALSE(w.requests().empty());
  const v1::WorkerGenerateRequest sent = w.requests().back();
  EXPECT_EQ(sent.sampling().max_tokens(), 64 - sent.prompt_token_ids_size());
  EXPECT_FLOAT_EQ(sent.sampling().temperature(), 0.6f);
  EXPECT_FLOAT_EQ(sent.sampling().top_p(), 0.5f) << "the request's own value";
  EXPECT_FALSE(sent.sampling().has_top_k());
  // The Responses API reports the values it runs with.
  r = Post(port(), "/v1/responses", {{"input", "hi"}, {"max_output_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_FLOAT_EQ(j["temperature"].get<float>(), 0.6f);
  EXPECT_FLOAT_EQ(j["top_p"].get<float>(), 0.9f);
}

// The Responses API: the chat request it amounts to, answered as a Response object, or as the
// Responses API's named events whose deltas make the same text.
TEST_F(OpenAiFrontendTest, ResponsesAreTheChatAnswerAsAResponseObject) {
  FakeWorker::Options o;
  o.info = FakeWorker::DefaultInfo();
  o.info.set_chat_template(
      "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
      "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  FakeWorker& w = AddWorker(o);
  StartRouter();
  HttpResult chat = Post(
      port(), "/v1/chat/completions",
      {{"messages",
        {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}},
       {"max_tokens", 3}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  const Json c = Json::parse(chat.body);
  auto last_prompt = [&w] {
    const v1::WorkerGenerateRequest last = w.requests().back();
    return std::vector<int>(last.prompt_token_ids().begin(), last.prompt_token_ids().end());
  };
  const std::vector<int> chat_prompt = last_prompt();

  HttpResult r = Post(port(), "/v1/responses",
                      {{"model", "fake-model"},
                       {"instructions", "Be brief."},
                       {"input", "hi"},
                       {"max_output_tokens", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(last_prompt(), chat_prompt) << "the same chat prompt";
  Json j = Json::parse(r.body);
  EXPECT_TRUE(absl::StartsWith(j["id"].get<std::string>(), "resp_"));
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["status"], "incomplete") << "3 tokens was the limit";
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], c["choices"][0]["message"]["content"]);
  EXPECT_EQ(j["usage"]["input_tokens"], c["usage"]["prompt_tokens"]);
  EXPECT_EQ(j["usage"]["output_tokens"], 3);

  r = Post(
      port(), "/v1/responses",
      {{"instructions", "Be brief."}, {"input", "hi"}, {"max_output_tokens", 3}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  std::string text, last;
  for (absl::string_view block : absl::StrSplit(r.body, "\n\n", absl::SkipEmpty())) {
    const size_t data = block.find("\ndata: ");
    ASSERT_NE(data, absl::string_view::npos) << block;
    const Json e = Json::parse(block.substr(data + 7));
    EXPECT_EQ(block.substr(7, data - 7), e["type"].get<std::string>());
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
    last = e["type"];
  }
  EXPECT_EQ(text, c["choices"][0]["message"]["content"]);
  EXPECT_EQ(last, "response.incomplete");

  // A named function: the whole reply is its arguments, as in chat.
  r = Post(port(), "/v1/responses",
           {{"input", "hi"},
            {"max_output_tokens", 3},
            {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", Json::object()}}}},
            {"tool_choice", {{"type", "function"}, {"name", "f"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = Json::parse(r.body);
  ASSERT_EQ(j["output"].size(), 1u) << r.body;
  EXPECT_EQ(j["output"][0]["type"], "function_call");
  EXPECT_EQ(j["output"][0]["name"], "f");
  EXPECT_EQ(j["output"][0]["arguments"], c["choices"][0]["message"]["content"]);
  EXPECT_EQ(j["tools"][0]["name"], "f");
  // "auto" needs the router's --tool-call-parser, as chat does.
  r = Post(port(), "/v1/responses",
           {{"input", "hi"}, {"tools", {{{"type", "function"}, {"name", "f"}}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("--tool-call-parser"));

  r = Post(port(), "/v1/responses", {{"input", "hi"}, {"previous_response_id", "resp_x"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["param"], "previous_response_id");
  EXPECT_EQ(Call(port(), http::verb::get, "/v1/responses").status, 405);
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
      {"unknown endpoint", http::verb::post, "/v1/assistants", "{}", 404, "no route"},
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

TEST_F(OpenAiFrontendTest, ClientThatDisconnectsCancelsItsWorkerStream) {
  FakeWorker::Options o;
  o.token_interval = absl::Milliseconds(50);
  FakeWorker& w = AddWorker(o);
  StartRouter();
  net::io_context ioc;
  tcp::socket socket(ioc);
  Send(socket, port(), http::verb::post, "/v1/completions",
       R"({"prompt": "hi", "max_tokens": 60, "stream": true, "ignore_eos": true})");
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

// Shutdown returns once every stream of the HTTP API is destroyed: they use the router's queue,
// pool and metrics, which go with it. Their client is still connected, their worker stalled.
TEST_F(OpenAiFrontendTest, ShutdownReturnsOnceTheHttpApisStreamsAreGone) {
  FakeWorker& w = AddWorker();
  StartRouter();
  w.SetStall(true);  // streams send nothing until cancelled
  net::io_context ioc;
  tcp::socket socket(ioc);
  Send(socket, port(), http::verb::post, "/v1/embeddings",
       Json({{"input", std::vector<std::vector<int>>(64, std::vector<int>{97})}}).dump());
  ASSERT_TRUE(w.WaitForActiveStreams(64, absl::Seconds(10)));
  EXPECT_EQ(router_->open_streams(), 64);
  router_->Shutdown(absl::ZeroDuration());
  EXPECT_EQ(router_->open_streams(), 0);
  EXPECT_TRUE(w.WaitForCancellations(64, absl::Seconds(5)));
}

// A worker that dies mid-answer. A request goes on from another worker after the tokens it had,
// each sample after its own, streamed or not: the client gets the whole answer, once. Beams,
// not streamed, start over.
TEST_F(OpenAiFrontendTest, WorkerDeathMidAnswerIsResumedElsewhere) {
  FakeWorker::Options slow;
  slow.token_interval = absl::Milliseconds(100);
  slow.load = testing::Load(1000);
  FakeWorker& a = AddWorker(slow);
  FakeWorker::Options other;
  other.load = testing::Load(500);  // fewer free blocks: the router prefers a
  FakeWorker& b = AddWorker(other);
  StartRouter();
  // Posts `body`, kills `a` once it has sent 3 messages of it, and returns the answer.
  auto killed_midway = [&](const Json& body) {
    if (a.generate_calls() > 0) {
      a.Restart();
      EXPECT_TRUE(WaitFor([&] { return router_->worker_stats().ready == 2; }));
    }
    const int64_t sent = a.tokens_sent();
    HttpResult r;
    std::thread client([&] { r = Post(port(), "/v1/completions", body); });
    EXPECT_TRUE(WaitFor([&] { return a.tokens_sent() >= sent + 3; }));
    a.Kill();
    client.join();
    return r;
  };
  auto streamed_text = [](const HttpResult& r) {
    std::string text;
    for (const Json& event : Events(r.body)) {
      if (event.is_object()) text += event["choices"][0]["text"].get<std::string>();
    }
    return text;
  };

  HttpResult r = killed_midway({{"prompt", "hello"}, {"max_tokens", 8}, {"echo", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], "helloabcdefgh") << "echoed once, then a's and b's tokens";
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  ASSERT_EQ(b.generate_calls(), 1);
  EXPECT_GE(b.requests().back().resumed_output_token_ids_size(), 3);

  r = killed_midway({{"prompt", "hello"}, {"max_tokens", 8}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 2u);
  for (const Json& choice : j["choices"]) EXPECT_EQ(choice["text"], "abcdefgh");
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
  ASSERT_EQ(b.generate_calls(), 2);
  ASSERT_EQ(b.requests().back().resumed_samples_size(), 2);
  EXPECT_GE(b.requests().back().resumed_samples(1).token_ids_size(), 3);

  b.SetLoad(testing::Load(10));
  r = killed_midway({{"prompt", "hello"}, {"max_tokens", 8}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("\"error\"")));
  EXPECT_EQ(streamed_text(r), "abcdefgh") << "a's first tokens, then b's after them";
  ASSERT_EQ(b.generate_calls(), 3);
  EXPECT_GE(b.requests().back().resumed_output_token_ids_size(), 3);

  r = killed_midway({{"prompt", "hello"}, {"max_tokens", 8}, {"stream", true}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("\"error\"")));
  std::string texts[2];
  for (const Json& event : Events(r.body)) {
    if (event.is_object()) {
      const Json& choice = event["choices"][0];
      texts[choice["index"].get<int>()] += choice["text"].get<std::string>();
    }
  }
  EXPECT_EQ(texts[0], "abcdefgh");
  EXPECT_EQ(texts[1], "abcdefgh");
  ASSERT_EQ(b.generate_calls(), 4);
  EXPECT_EQ(b.requests().back().resumed_samples_size(), 2);

  // Beams (vLLM's use_beam_search) cannot resume. Not streamed, nobody has seen their tokens:
  // they start over on b, and the answer holds b's beams alone.
  r = killed_midway({{"prompt", "hello"}, {"max_tokens", 8}, {"n", 2}, {"use_beam_search", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 2u);
  for (const Json& choice : j["choices"]) EXPECT_EQ(choice["text"], "abcdefgh");
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
  ASSERT_EQ(b.generate_calls(), 5);
  const v1::WorkerGenerateRequest again = b.requests().back();
  EXPECT_EQ(again.sampling().beam_width(), 2);
  EXPECT_EQ(again.sampling().temperature(), 0.0f);
  EXPECT_EQ(again.resumed_output_token_ids_size(), 0);
  EXPECT_EQ(again.resumed_samples_size(), 0);
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
}  // namespace pagellm::openai_test
