// Token-mask cost of structured output on real vocabularies (SmolLM2's 49,152 tokens, Qwen2's
// 151,646; tools/fixtures/make_tokenizer_fixture.py makes them), from the repository root:
//   build/bin/grammar_matcher_bench [--benchmark_filter=...]
// Mask/cold: a state's first mask (the vocabulary walk); Mask/cached: a state seen before
// (a copy of vocab/8 bytes); Accept: advancing past one token; CompileRequiredTools/N: a
// "required" tool choice over N tools compiled, and its first mask; CompileRegex/...,
// CompileGbnf/...: a pattern or grammar compiled, and its first mask; MaskCold/regex_any: the
// first mask inside `.{0,400}` (every token without a newline may follow); BuildToolsGrammar/
// build|copy: 128 tools' schema built into a grammar, or that grammar copied.
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/structured/gbnf_grammar.h"
#include "common/structured/grammar_matcher.h"
#include "common/structured/json_schema_grammar.h"
#include "common/structured/regex_grammar.h"
#include "common/tokenizer/tokenizer.h"

namespace pagellm::structured {
namespace {

constexpr char kSchema[] = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "age": {"type": "integer"},
  "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"]})";

struct Vocab {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenVocabulary> vocab;
};

const Vocab* Load(const std::string& name) {
  static auto* cache = new std::map<std::string, Vocab>();
  auto it = cache->find(name);
  if (it != cache->end()) return it->second.tok ? &it->second : nullptr;
  Vocab& v = (*cache)[name];
  std::ifstream f("build/fixtures/tokenizer/" + name + "/tokenizer.json", std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  auto tok = Tokenizer::FromHfTokenizerJson(ss.str());
  if (!tok.ok()) return nullptr;
  v.tok = *std::move(tok);
  const Tokenizer* t = v.tok.get();
  v.vocab = *TokenVocabulary::Create(
      t->vocab_size(), [t](int32_t id) { return t->TokenPiece(id); },
      [t](int32_t id) { return !t->IsSpecial(id); });
  return &v;
}

// A matcher of a fresh grammar, advanced past `prefix` byte-token by byte-token.
GrammarMatcher At(const Vocab& v, const std::string& prefix) {
  auto g = CompiledGrammar::Create(*JsonSchemaGrammar(kSchema), v.vocab);
  GrammarMatcher m(g);
  for (int32_t id : v.tok->Encode(prefix, false, false)) (void)m.Accept(id);
  return m;
}

void BM_MaskCold(benchmark::State& state, const std::string& name, const std::string& prefix) {
  const Vocab* v = Load(name);
  if (v == nullptr) return state.SkipWithError("run tools/fixtures/make_tokenizer_fixture.py");
  std::vector<uint64_t> mask(v->vocab->mask_words());
  for (auto _ : state) {
    state.PauseTiming();
    GrammarMatcher m = At(*v, prefix);
    state.ResumeTiming();
    m.FillNextTokenMask(absl::MakeSpan(mask));
  }
  int allowed = 0;
  for (uint64_t w : mask) allowed += __builtin_popcountll(w);
  state.counters["allowed"] = allowed;
}

void BM_MaskCached(benchmark::State& state, const std::string& name) {
  const Vocab* v = Load(name);
  if (v == nullptr) return state.SkipWithError("run tools/fixtures/make_tokenizer_fixture.py");
  std::vector<uint64_t> mask(v->vocab->mask_words());
  GrammarMatcher m = At(*v, "{\"name\": \"Al");
  m.FillNextTokenMask(absl::MakeSpan(mask));
  for (auto _ : state) m.FillNextTokenMask(absl::MakeSpan(mask));
}

void BM_Accept(benchmark::State& state, const std::string& name) {
  const Vocab* v = Load(name);
  if (v == nullptr) return state.SkipWithError("run tools/fixtures/make_tokenizer_fixture.py");
  const std::vector<int32_t> ids = v->tok->Encode(
      R"({"name": "Alexandra Smith", "age": 42, "tags": ["climbing", "jazz", "chess"]})", false,
      false);
  auto g = CompiledGrammar::Create(*JsonSchemaGrammar(kSchema), v->vocab);
  for (auto _ : state) {
    GrammarMatcher m(g);
    for (int32_t id : ids) benchmark::DoNotOptimize(m.Accept(id));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

// The schema of a "required" tool choice over `n` tools (router/http/openai_tools.h's
// RequiredToolsSchema): an array of {"name": one tool's name, "parameters": its schema}, each
// tool taking a city, a unit enum and an optional day count.
std::string RequiredToolsSchema(int n) {
  std::string variants;
  for (int i = 0; i < n; ++i) {
    if (i > 0) variants += ", ";
    variants += R"({"type": "object", "properties": {"name": {"type": "string", "enum": ["tool_)" +
                std::to_string(i) +
                R"("]}, "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 64},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}},
      "required": ["city", "unit"]}}, "required": ["name", "parameters"]})";
  }
  return R"({"type": "array", "minItems": 1, "items": {"anyOf": [)" + variants + "]}}";
}

// What admitting a request with a new tool set costs the engine thread: the schema compiled to
// a grammar, and the first mask (the array's start).
void BM_CompileRequiredTools(benchmark::State& state) {
  const Vocab* v = Load("smollm2");
  if (v == nullptr) return state.SkipWithError("run tools/fixtures/make_tokenizer_fixture.py");
  const std::string schema = RequiredToolsSchema(static_cast<int>(state.range(0)));
  std::vector<uint64_t> mask(v->vocab->mask_words());
  for (auto _ : state) {
    auto g = CompiledGrammar::Create(*JsonSchemaGrammar(schema), v->vocab);
    GrammarMatcher m(g);
    m.FillNextTokenMask(absl::MakeSpan(mask));
  }
  state.counters["schema_bytes"] = static_cast<double>(schema.size());
}

// What a worker's gRPC thread spends on a request's tool set: the schema built into a grammar
// (BuildGrammar), or a copy of the grammar it built for an earlier request (GrammarBuildCache,
// worker/engine).
void BM_BuildToolsGrammar(benchmark::State& state, bool copy) {
  const std::string schema = RequiredToolsSchema(static_cast<int>(state.range(0)));
  const Grammar built = *JsonSchemaGrammar(schema);
  for (auto _ : state) {
    if (copy) {
      Grammar g = built;
      benchmark::DoNotOptimize(g);
    } else {
      benchmark::DoNotOptimize(JsonSchemaGrammar(schema));
    }
  }
}

// What a request with a new regex or GBNF grammar costs the engine thread: the text compiled,
// and the first mask.
void BM_CompileText(benchmark::State& state, bool gbnf, const std::string& text) {
  const Vocab* v = Load("smollm2");
  if (v == nullptr) return state.SkipWithError("run tools/fixtures/make_tokenizer_fixture.py");
  std::vector<uint64_t> mask(v->vocab->mask_words());
  for (auto _ : state) {
    auto g = CompiledGrammar::Create(*(gbnf ? GbnfGrammar(text) : RegexGrammar(text)), v->vocab);
    GrammarMatcher m(g);
    m.FillNextTokenMask(absl::MakeSpan(mask));
  }
}

void BM_MaskColdRegexAny(benchmark::State& state) {
  const Vocab* v = Load("smollm2");
  if (v == nullptr) return state.SkipWithError("run tools/fixtures/make_tokenizer_fixture.py");
  std::vector<uint64_t> mask(v->vocab->mask_words());
  for (auto _ : state) {
    state.PauseTiming();
    GrammarMatcher m(CompiledGrammar::Create(*RegexGrammar("Note: .{0,400}"), v->vocab));
    for (int32_t id : v->tok->Encode("Note: a", false, false)) (void)m.Accept(id);
    state.ResumeTiming();
    m.FillNextTokenMask(absl::MakeSpan(mask));
  }
  int allowed = 0;
  for (uint64_t w : mask) allowed += __builtin_popcountll(w);
  state.counters["allowed"] = allowed;
}

BENCHMARK_CAPTURE(BM_CompileText, regex_phone, false, R"(\(\d{3}\) \d{3}-\d{4})")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CompileText, regex_email, false, R"([\w.+-]+@[\w-]+\.[a-z]{2,4})")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CompileText, regex_bounded_1000, false, R"([A-Za-z ,.]{1,1000})")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CompileText, gbnf_arithmetic, true, R"g(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= "-"? [0-9]+ ("." [0-9]+)?)g")
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskColdRegexAny)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileRequiredTools)
    ->Arg(1)
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildToolsGrammar, build, false)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildToolsGrammar, copy, true)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskCold, smollm2_object_start, "smollm2", "{")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskCold, smollm2_in_string, "smollm2", "{\"name\": \"Al")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskCold, smollm2_integer, "smollm2", "{\"name\": \"Al\", \"age\": 4")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskCold, qwen2_in_string, "qwen2", "{\"name\": \"Al")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MaskCached, smollm2, "smollm2")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Accept, smollm2, "smollm2");

}  // namespace
}  // namespace pagellm::structured

BENCHMARK_MAIN();
