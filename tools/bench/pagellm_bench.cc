// pagellm-bench: offline throughput of the engine on one model, in the shapes llama.cpp's
// llama-bench / llama-batched-bench report, so tools/bench/compare_llamacpp.py can put the two
// side by side in one run.
//   prefill:  one request with a --prompt-len token prompt; tokens/s of the prefill step.
//   decode B: B requests of --decode-prompt-len prompt tokens each, --decode-len generated
//             tokens each (ignore_eos, greedy); tokens/s over the steps where all B decode.
// Prints text, or one JSON object with --json.
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags_util.h"
#include "common/logging.h"
#include "nlohmann/json.hpp"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/engine/engine.h"
#include "worker/flags/model_flags.h"
#include "worker/flags/parallel_flags.h"
#include "worker/model/model_loader.h"

ABSL_FLAG(int64_t, prompt_len, 512, "prefill benchmark prompt length");
ABSL_FLAG(int64_t, decode_prompt_len, 128, "prompt length of each decode-benchmark request");
ABSL_FLAG(int64_t, decode_len, 128, "tokens generated per decode-benchmark request");
ABSL_FLAG(std::string, batch, "1,32,64", "decode batch sizes");
ABSL_FLAG(int32_t, repeats, 3, "prefill repetitions (best is reported)");
ABSL_FLAG(bool, json, false, "print JSON");
ABSL_FLAG(std::string, dtype, "auto", "F32/F16/BF16 matrices: auto | float32 | bfloat16");

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> PromptIds(int64_t n, int64_t vocab, uint64_t salt) {
  std::vector<int32_t> ids(n);
  uint64_t s = 0x1234567 + salt;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab / 2)) + 100;
  }
  return ids;
}

int Die(const absl::Status& s) {
  std::fprintf(stderr, "pagellm-bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  pagellm::cli::ParseFlags(argc, argv);
  pagellm::InitLogging("warn");

  std::vector<int64_t> batches;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batch), ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(b, &v) || v <= 0) return Die(absl::InvalidArgumentError("bad --batch"));
    batches.push_back(v);
  }
  int64_t max_batch = 1;
  for (int64_t b : batches) max_batch = std::max(max_batch, b);
  const int64_t prompt_len = absl::GetFlag(FLAGS_prompt_len);
  const int64_t dp = absl::GetFlag(FLAGS_decode_prompt_len), dl = absl::GetFlag(FLAGS_decode_len);

  // --tensor-parallel-size: the other ranks start first and serve this one's steps.
  auto group = pagellm::cli::JoinGroupFromFlags();
  if (!group.ok()) return Die(group.status());
  const pagellm::LoadModelOptions lo = pagellm::cli::ModelOptionsFromFlags();
  auto loaded = pagellm::LoadModel(lo);
  if (!loaded.ok()) return Die(loaded.status());
  const int64_t vocab = loaded->checkpoint->config.vocab_size;

  pagellm::BackendOptions options;
  pagellm::CpuBackendOptions& bo = options.cpu;
  bo.threads = pagellm::cli::ThreadsFromFlags();
  bo.dtype = absl::GetFlag(FLAGS_dtype);
  bo.max_batch_tokens = std::max<int64_t>(2048, prompt_len);
  bo.num_kv_blocks = std::max<int64_t>(max_batch * ((dp + dl) / 16 + 2), prompt_len / 16 + 2) + 64;
  auto backend = pagellm::cli::CreateBackendInGroup(options, loaded->checkpoint, std::move(*group));
  if (!backend.ok()) return Die(backend.status());
  pagellm::EngineOptions eo;
  eo.max_num_batched_tokens = bo.max_batch_tokens;
  eo.max_num_seqs = std::max<int64_t>(256, max_batch);
  auto engine = pagellm::Engine::Create(backend->get(), loaded->tokenizer.get(), eo);
  if (!engine.ok()) return Die(engine.status());
  pagellm::Engine& e = **engine;

  pagellm::SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.ignore_eos = true;
  std::vector<pagellm::SequenceOutput> out;
  int request = 0;

  // Prefill.
  double best_prefill = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    pagellm::SamplingParams p = greedy;
    p.max_tokens = 1;
    auto st = e.AddRequest(std::to_string(request++), PromptIds(prompt_len, vocab, r), p);
    if (!st.ok()) return Die(st);
    const auto t0 = Clock::now();
    while (e.HasUnfinished()) {
      out.clear();
      if (auto s = e.Step(&out); !s.ok()) return Die(s);
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best_prefill = std::max(best_prefill, prompt_len / sec);
  }

  // Decode at each batch size.
  nlohmann::json decode = nlohmann::json::object();
  // Milliseconds a decode step spent in tensor-parallel collectives (0 for one rank).
  nlohmann::json collective = nlohmann::json::object();
  for (int64_t b : batches) {
    pagellm::SamplingParams p = greedy;
    p.max_tokens = static_cast<int32_t>(dl);
    for (int64_t i = 0; i < b; ++i) {
      auto st = e.AddRequest(std::to_string(request++), PromptIds(dp, vocab, 1000 + i), p);
      if (!st.ok()) return Die(st);
    }
    // Prefill every prompt (each has produced its first token) before timing.
    std::set<std::string> started;
    while (static_cast<int64_t>(started.size()) < b) {
      out.clear();
      if (auto s = e.Step(&out); !s.ok()) return Die(s);
      for (const auto& o : out) started.insert(o.request_id);
    }
    int64_t tokens = 0;
    const pagellm::EngineStats s0 = e.stats();
    const auto t0 = Clock::now();
    while (e.HasUnfinished()) {
      out.clear();
      if (auto s = e.Step(&out); !s.ok()) return Die(s);
      tokens += static_cast<int64_t>(out.size());
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    decode[std::to_string(b)] = tokens / sec;
    const pagellm::EngineStats s1 = e.stats();
    collective[std::to_string(b)] = 1e3 * (s1.collective_seconds - s0.collective_seconds) /
                                    std::max<int64_t>(1, s1.steps - s0.steps);
  }

  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j;
    j["prefill_tok_s"] = best_prefill;
    j["prompt_len"] = prompt_len;
    j["decode_tok_s"] = decode;
    j["decode_prompt_len"] = dp;
    j["decode_len"] = dl;
    j["decode_collective_ms_per_step"] = collective;
    j["tensor_parallel_size"] = (*backend)->tensor_parallel_size();
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("prefill %lld tokens: %.1f tok/s\n", static_cast<long long>(prompt_len),
                best_prefill);
    for (auto& [k, v] : decode.items())
      std::printf("decode batch %s: %.1f tok/s (collectives %.2f ms a step)\n", k.c_str(),
                  v.get<double>(), collective[k].get<double>());
  }
  return 0;
}
