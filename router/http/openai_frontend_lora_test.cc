// The OpenAI-compatible HTTP API end to end (router/http/testing/openai_http_fixture.h): LoRA
// adapters as models, and vLLM's runtime LoRA updating fanned out to the workers.
#include <string>
#include <vector>

#include "router/http/testing/openai_http_fixture.h"

namespace pagellm::openai_test {
namespace {

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

TEST_F(OpenAiFrontendTest, AnAdapterNoWorkerServesIsLoadedWhenARequestNamesIt) {
  // vLLM's lora_filesystem_resolver: the name is the adapter's directory in each worker's
  // --lora-dir; the request runs once the workers have loaded it.
  FakeWorker& a = AddWorker();
  FakeWorker& b = AddWorker();
  runtime_lora_ = true;
  OpenAiFrontend::Options openai;
  openai.load_adapters_on_demand = true;
  StartRouter(1024, 1 << 20, nullptr, openai);
  HttpResult r =
      Post(port(), "/v1/completions", {{"model", "sql"}, {"prompt", "hi"}, {"max_tokens", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["model"], "sql");
  r = Call(port(), http::verb::get, "/v1/models");
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(Json::parse(r.body)["data"].size(), 2u);
  EXPECT_EQ(Json::parse(r.body)["data"][1]["id"], "sql");
  for (FakeWorker* w : {&a, &b}) {
    for (const auto& seen : w->requests()) EXPECT_EQ(seen.sampling().lora_adapter(), "sql");
  }
  EXPECT_EQ(a.requests().size() + b.requests().size(), 1u);
  // Loaded for an embeddings request too.
  r = Post(port(), "/v1/embeddings", {{"model", "emb-lora"}, {"input", "hi"}});
  EXPECT_NE(r.status, 404) << r.body;
  r = Call(port(), http::verb::get, "/v1/models");
  EXPECT_EQ(Json::parse(r.body)["data"].size(), 3u);

  // No such directory on any worker: the unknown model's 404, as vLLM answers.
  r = Post(port(), "/v1/completions",
           {{"model", "missing-lora"}, {"prompt", "hi"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_THAT(r.body, HasSubstr("does not exist"));
  // A directory that is no adapter of this model: the workers' refusal.
  r = Post(port(), "/v1/completions", {{"model", "bad"}, {"prompt", "hi"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("not an adapter"));
  // Not a name an adapter may have: nothing is loaded.
  r = Post(port(), "/v1/completions", {{"model", "a b"}, {"prompt", "hi"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 404) << r.body;
  r = Call(port(), http::verb::get, "/v1/models");
  EXPECT_EQ(Json::parse(r.body)["data"].size(), 3u);
}

}  // namespace
}  // namespace pagellm::openai_test
