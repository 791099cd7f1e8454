// Encode / Decode throughput on the fixture's vocabularies (run
// tools/fixtures/make_tokenizer_fixture.py first), from the repository root:
//   build/bin/tokenizer_bench [--benchmark_filter=...]
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fixture corpus repeated to ~1 MiB, and the tokenizer of `vocab`.
struct Input {
  std::unique_ptr<Tokenizer> tok;
  std::string text;
};

const Input* Load(const std::string& vocab) {
  static auto* cache = new std::map<std::string, Input>();
  auto it = cache->find(vocab);
  if (it != cache->end()) return it->second.tok ? &it->second : nullptr;
  Input& in = (*cache)[vocab];
  const std::string dir = "build/fixtures/tokenizer/";
  const std::string json = Read(dir + vocab + "/tokenizer.json");
  const std::string corpus = Read(dir + "corpus.json");
  if (json.empty() || corpus.empty()) return nullptr;
  auto tok = Tokenizer::FromHfTokenizerJson(json);
  if (!tok.ok()) return nullptr;
  in.tok = *std::move(tok);
  std::string all;
  for (const auto& s : nlohmann::json::parse(corpus)) all += s.get<std::string>() + "\n";
  while (in.text.size() < (1 << 20)) in.text += all;
  return &in;
}

void BM_Encode(benchmark::State& state, const std::string& vocab) {
  const Input* in = Load(vocab);
  if (in == nullptr) {
    state.SkipWithError("fixture missing: run tools/fixtures/make_tokenizer_fixture.py");
    return;
  }
  size_t tokens = 0;
  for (auto _ : state) tokens = in->tok->Encode(in->text, false, true).size();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * in->text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_Decode(benchmark::State& state, const std::string& vocab) {
  const Input* in = Load(vocab);
  if (in == nullptr) {
    state.SkipWithError("fixture missing: run tools/fixtures/make_tokenizer_fixture.py");
    return;
  }
  const std::vector<int32_t> ids = in->tok->Encode(in->text, false, true);
  for (auto _ : state) benchmark::DoNotOptimize(in->tok->Decode(ids, false));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

BENCHMARK_CAPTURE(BM_Encode, smollm2, std::string("smollm2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_bpe, std::string("llama-bpe"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_spm, std::string("llama-spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, smollm2, std::string("smollm2"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagellm

BENCHMARK_MAIN();
