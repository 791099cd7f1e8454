// `pagellm generate`: loads a model, runs every prompt through one Engine (all prompts are
// batched together) and prints completions: streamed text for a single prompt, or one JSON
// object per completion with --json; with --embed, one JSON object per prompt with its
// embedding.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/api/proto_convert.h"
#include "common/api/sampling_defaults.h"
#include "common/flags_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/cli/completion.h"
#include "tools/cli/remote_generate.h"
#include "worker/engine/engine.h"
#include "worker/flags/engine_flags.h"
#include "worker/flags/open_from_flags.h"

ABSL_FLAG(std::string, prompt, "", "prompt text");
ABSL_FLAG(std::string, prompts_file, "", "file with one prompt per line (batched together)");
ABSL_FLAG(int32_t, max_tokens, 64, "maximum tokens to generate per completion");
ABSL_FLAG(int32_t, min_tokens, 0, "minimum tokens before EOS / stop may end a completion");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature; 0 means greedy");
ABSL_FLAG(double, top_p, 1.0, "nucleus sampling mass");
ABSL_FLAG(int32_t, top_k, 0, "top-k sampling (0: off)");
ABSL_FLAG(double, min_p, 0.0, "min-p sampling");
ABSL_FLAG(double, repetition_penalty, 1.0, "repetition penalty (1: off)");
ABSL_FLAG(double, presence_penalty, 0.0, "presence penalty");
ABSL_FLAG(double, frequency_penalty, 0.0, "frequency penalty");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt, "sampling seed (per request)");
ABSL_FLAG(bool, ignore_eos, false, "keep generating after EOS");
ABSL_FLAG(std::optional<int32_t>, logprobs, std::nullopt,
          "return N top logprobs per token (--json)");
ABSL_FLAG(std::optional<int32_t>, prompt_logprobs, std::nullopt,
          "score the prompt: each prompt token's logprob and the N best (--json)");
ABSL_FLAG(bool, json, false, "print one JSON object per completion");
ABSL_FLAG(bool, embed, false,
          "embed each prompt instead of generating: one JSON object per prompt with its "
          "embedding (the last token's final hidden state, L2-normalized, as /v1/embeddings)");
ABSL_FLAG(std::string, json_schema, "",
          "constrain the output to JSON valid under this JSON Schema: a file, or the schema "
          "itself when it starts with '{'");
ABSL_FLAG(bool, json_object, false, "constrain the output to a JSON object");
ABSL_FLAG(std::optional<std::string>, regex, std::nullopt,
          "constrain the output to a full match of this regular expression (Python re syntax)");
ABSL_FLAG(std::string, grammar, "",
          "constrain the output to this GBNF grammar's rule root: a file, or the grammar itself "
          "when it holds '::='");
ABSL_FLAG(int32_t, n, 1, "parallel samples per prompt (they share the prompt's KV blocks)");
ABSL_FLAG(int32_t, beam_width, 0, "beam search of this width (>= 2; needs --temperature 0)");
ABSL_FLAG(double, length_penalty, 1.0, "beam score = logprob / length^length_penalty");
ABSL_FLAG(bool, early_stopping, false, "stop beam search once beam-width hypotheses finish");
ABSL_FLAG(std::string, lora_adapter, "",
          "run every prompt with this LoRA adapter: a name of --lora-modules, or one the --server "
          "serves");
ABSL_FLAG(bool, stats, false, "print engine statistics as one JSON object on stderr at the end");
ABSL_FLAG(std::string, log_level, "warn", "log level: debug, info, warn, error");
ABSL_FLAG(std::string, server, "",
          "host:port of a pagellm router: generate there instead of loading a model");

namespace pagellm::cli {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pagellm generate: %s\n", s.ToString().c_str());
  return 1;
}

// A "Vm..." line of /proc/self/status in bytes; -1 where there is none (not Linux).
int64_t ProcStatusBytes(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t kb = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      kb = std::strtoll(line + n + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

// [{"token_id", "logprob", "rank", "top": [{"token_id", "logprob"}, ...]}, ...]
nlohmann::json LogprobsJson(const std::vector<SampleResult>& results) {
  nlohmann::json lp = nlohmann::json::array();
  for (const SampleResult& r : results) {
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprob& t : r.top_logprobs()) {
      top.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}});
    }
    lp.push_back(
        {{"token_id", r.token_id}, {"logprob", r.logprob}, {"rank", r.rank}, {"top", top}});
  }
  return lp;
}

// Resident memory at the phases --stats reports.
struct MemoryStats {
  int64_t after_load = -1;    // the model open (weights packed, checkpoint pages dropped)
  int64_t after_engine = -1;  // and the engine made (KV cache allocated)
};

void PrintStats(const EngineStats& s, double seconds, const MemoryStats& mem) {
  nlohmann::json j;
  j["rss_after_load_bytes"] = mem.after_load;
  j["rss_after_engine_bytes"] = mem.after_engine;
  j["rss_end_bytes"] = ProcStatusBytes("VmRSS");
  j["peak_rss_bytes"] = ProcStatusBytes("VmHWM");
  j["steps"] = s.steps;
  j["preemptions"] = {{"recompute", s.preemptions_recompute},
                      {"swap", s.preemptions_swap},
                      {"total", s.preemptions()}};
  j["swap_fallbacks"] = s.swap_fallbacks;
  j["swapped_out_blocks"] = s.swapped_out_blocks;
  j["swapped_in_blocks"] = s.swapped_in_blocks;
  j["peak_used_blocks"] = s.peak_used_blocks;
  j["num_kv_blocks"] = s.num_kv_blocks;
  j["num_swap_blocks"] = s.num_swap_blocks;
  j["prefix_cache_hit_tokens"] = s.prefix_cache_hit_tokens;
  j["computed_prompt_tokens"] = s.computed_prompt_tokens;
  j["generated_tokens"] = s.generated_tokens;
  j["kv_live_token_ratio"] = s.kv_live_token_ratio;
  j["structured_output_masks"] = {{"computed", s.structured_masks_computed},
                                  {"cached", s.structured_masks_cached},
                                  {"seconds", s.structured_mask_seconds}};
  j["spec_decode"] = {{"draft_tokens", s.spec_draft_tokens},
                      {"accepted_tokens", s.spec_accepted_tokens},
                      {"free_tokens", s.spec_free_tokens}};
  j["elapsed_s"] = seconds;
  std::fprintf(stderr, "%s\n", j.dump().c_str());
}

// The sampling flags a model's generation_config.json gives defaults for
// (common/api/sampling_defaults.h): a flag left off the command line takes the model's value,
// as vLLM's LLM.generate takes it without SamplingParams. max_new_tokens replaces
// --max-tokens' 64.
void ApplyModelDefaults(const v1::SamplingParams& d, SamplingParams* p) {
  if (d.has_temperature() && !FlagGiven("temperature")) p->temperature = d.temperature();
  if (d.has_top_p() && !FlagGiven("top_p")) p->top_p = d.top_p();
  if (d.has_top_k() && !FlagGiven("top_k")) p->top_k = d.top_k();
  if (d.has_min_p() && !FlagGiven("min_p")) p->min_p = d.min_p();
  if (d.has_repetition_penalty() && !FlagGiven("repetition_penalty")) {
    p->repetition_penalty = d.repetition_penalty();
  }
  if (d.has_presence_penalty() && !FlagGiven("presence_penalty")) {
    p->presence_penalty = d.presence_penalty();
  }
  if (d.has_frequency_penalty() && !FlagGiven("frequency_penalty")) {
    p->frequency_penalty = d.frequency_penalty();
  }
  if (d.has_max_tokens() && !FlagGiven("max_tokens")) p->max_tokens = d.max_tokens();
}

// For --server: the same flags, left unset in the request when not given, so that the serving
// side fills them from the model's defaults (its own API defaults are the flags' defaults).
void ClearFlagsNotGiven(v1::SamplingParams* p) {
  if (!FlagGiven("temperature")) p->clear_temperature();
  if (!FlagGiven("top_p")) p->clear_top_p();
  if (!FlagGiven("top_k")) p->clear_top_k();
  if (!FlagGiven("min_p")) p->clear_min_p();
  if (!FlagGiven("repetition_penalty")) p->clear_repetition_penalty();
  if (!FlagGiven("presence_penalty")) p->clear_presence_penalty();
  if (!FlagGiven("frequency_penalty")) p->clear_frequency_penalty();
}

// Generates in-process with the model the flags name.
absl::Status RunLocal(const std::vector<std::string>& prompts, SamplingParams params, bool stream,
                      std::vector<Completion>* done,
                      std::vector<std::vector<int32_t>>* prompt_ids) {
  ASSIGN_OR_RETURN(EngineOptions eo, EngineOptionsFromFlags());
  ASSIGN_OR_RETURN(OpenedModel model, OpenModelFromFlags());
  if (model.generation_config.has_value()) {
    v1::SamplingParams defaults;
    RETURN_IF_ERROR(
        MergeGenerationConfig(*model.generation_config, "generation_config.json", &defaults));
    ApplyModelDefaults(defaults, &params);
    if (defaults.ByteSizeLong() > 0) {
      PLOG_INFO("default sampling parameters from the model's generation_config.json: {}",
                DescribeSamplingDefaults(defaults));
    }
  }
  MemoryStats mem;
  mem.after_load = ProcStatusBytes("VmRSS");
  std::unique_ptr<Tokenizer> tokenizer = std::move(model.tokenizer);
  std::unique_ptr<Backend> backend = std::move(model.backend);
  eo.collect_kv_stats = absl::GetFlag(FLAGS_stats);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(backend.get(), tokenizer.get(), eo));
  mem.after_engine = ProcStatusBytes("VmRSS");
  const int32_t per_prompt = params.NumSequences();
  for (size_t i = 0; i < prompts.size(); ++i) {
    (*prompt_ids)[i] =
        tokenizer->Encode(prompts[i], /*add_special_tokens=*/true, /*parse_special=*/true);
    absl::Status st = engine->AddRequest(std::to_string(i), (*prompt_ids)[i], params);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("prompt ", i, ": ", st.message()));
  }
  std::vector<SequenceOutput> outputs;
  const auto start = std::chrono::steady_clock::now();
  while (engine->HasUnfinished()) {
    outputs.clear();
    RETURN_IF_ERROR(engine->Step(&outputs));
    for (SequenceOutput& o : outputs) {
      Completion& c = (*done)[std::stoul(o.request_id) * per_prompt + o.sample_index];
      c.text += o.text;
      c.token_ids.insert(c.token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      c.prompt_logprobs.insert(c.prompt_logprobs.end(), o.prompt_logprobs.begin(),
                               o.prompt_logprobs.end());
      if (o.only_prompt_logprobs()) continue;
      c.finish = o.finish_reason;
      c.cumulative_logprob = o.cumulative_logprob;
      if (!o.embedding.empty()) c.embedding = o.embedding;
      if (stream) {
        std::fwrite(o.text.data(), 1, o.text.size(), stdout);
        std::fflush(stdout);
      }
    }
  }
  if (stream) std::fputc('\n', stdout);
  if (absl::GetFlag(FLAGS_stats)) {
    PrintStats(engine->stats(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
               mem);
  }
  return absl::OkStatus();
}

}  // namespace

int GenerateMain(int argc, char** argv) {
  absl::SetProgramUsageMessage("pagellm generate --model PATH --prompt TEXT [flags]");
  const std::vector<std::vector<std::string>> repeated =
      ParseFlags(argc, argv, {"stop", "stop_token_id", "choice"});
  InitLogging(absl::GetFlag(FLAGS_log_level).c_str());

  std::vector<std::string> prompts;
  if (!absl::GetFlag(FLAGS_prompts_file).empty()) {
    std::ifstream in(absl::GetFlag(FLAGS_prompts_file));
    if (!in) return Fail(absl::NotFoundError("cannot read --prompts-file"));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) prompts.push_back(line);
    }
  }
  if (!absl::GetFlag(FLAGS_prompt).empty())
    prompts.insert(prompts.begin(), absl::GetFlag(FLAGS_prompt));
  if (prompts.empty()) return Fail(absl::InvalidArgumentError("give --prompt or --prompts-file"));

  SamplingParams params;
  params.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  params.min_tokens = absl::GetFlag(FLAGS_min_tokens);
  params.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  params.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  params.top_k = absl::GetFlag(FLAGS_top_k);
  params.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  params.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty));
  params.presence_penalty = static_cast<float>(absl::GetFlag(FLAGS_presence_penalty));
  params.frequency_penalty = static_cast<float>(absl::GetFlag(FLAGS_frequency_penalty));
  params.seed = absl::GetFlag(FLAGS_seed);
  params.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  params.logprobs = absl::GetFlag(FLAGS_logprobs);
  params.prompt_logprobs = absl::GetFlag(FLAGS_prompt_logprobs);
  params.n = absl::GetFlag(FLAGS_n);
  params.beam_width = absl::GetFlag(FLAGS_beam_width);
  params.length_penalty = static_cast<float>(absl::GetFlag(FLAGS_length_penalty));
  params.early_stopping = absl::GetFlag(FLAGS_early_stopping);
  params.lora_adapter = absl::GetFlag(FLAGS_lora_adapter);
  params.embed = absl::GetFlag(FLAGS_embed);
  params.stop = repeated[0];
  for (const std::string& id : repeated[1]) {
    try {
      params.stop_token_ids.push_back(std::stoi(id));
    } catch (...) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("bad --stop-token-id '", id, "'")));
    }
  }

  // Structured output: at most one of --json_schema, --json_object, --choice (repeatable),
  // --regex, --grammar.
  const std::string schema = absl::GetFlag(FLAGS_json_schema);
  const std::optional<std::string> regex = absl::GetFlag(FLAGS_regex);
  const std::string grammar = absl::GetFlag(FLAGS_grammar);
  if (static_cast<int>(!schema.empty()) + static_cast<int>(absl::GetFlag(FLAGS_json_object)) +
          static_cast<int>(!repeated[2].empty()) + static_cast<int>(regex.has_value()) +
          static_cast<int>(!grammar.empty()) >
      1) {
    return Fail(absl::InvalidArgumentError(
        "give at most one of --json_schema, --json_object, --choice, --regex and --grammar"));
  }
  // A flag's text, or the file it names.
  auto text_or_file = [](const std::string& value, bool inline_text,
                         const char* flag) -> absl::StatusOr<std::string> {
    if (inline_text) return value;
    std::ifstream in(value, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read --", flag, " ", value));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  if (!schema.empty()) {
    params.structured_output.kind = StructuredOutput::Kind::kJsonSchema;
    auto text = text_or_file(schema, schema.front() == '{', "json_schema");
    if (!text.ok()) return Fail(text.status());
    params.structured_output.json_schema = *std::move(text);
  } else if (!grammar.empty()) {
    params.structured_output.kind = StructuredOutput::Kind::kGrammar;
    auto text = text_or_file(grammar, grammar.find("::=") != std::string::npos, "grammar");
    if (!text.ok()) return Fail(text.status());
    params.structured_output.grammar = *std::move(text);
  } else if (absl::GetFlag(FLAGS_json_object)) {
    params.structured_output.kind = StructuredOutput::Kind::kJsonObject;
  } else if (!repeated[2].empty()) {
    params.structured_output.kind = StructuredOutput::Kind::kChoice;
    params.structured_output.choices = repeated[2];
  } else if (regex.has_value()) {
    params.structured_output.kind = StructuredOutput::Kind::kRegex;
    params.structured_output.regex = *regex;
  }

  const bool json = absl::GetFlag(FLAGS_json) || params.embed;
  const int32_t per_prompt = params.NumSequences();
  const bool stream = !json && prompts.size() == 1 && per_prompt == 1;
  // One completion per (prompt, sample), in that order.
  std::vector<Completion> done(prompts.size() * per_prompt);
  for (size_t i = 0; i < done.size(); ++i) {
    done[i].prompt_index = i / per_prompt;
    done[i].sample_index = static_cast<int32_t>(i % per_prompt);
  }
  std::vector<std::vector<int32_t>> prompt_ids(prompts.size());  // local runs only
  const std::string server = absl::GetFlag(FLAGS_server);
  v1::SamplingParams sampling;  // for --server
  SamplingParamsToProto(params, &sampling);
  ClearFlagsNotGiven(&sampling);
  const absl::Status st =
      server.empty() ? RunLocal(prompts, params, stream, &done, &prompt_ids)
                     : RemoteGenerate(server, prompts, sampling, per_prompt, stream, &done);
  if (!server.empty() && stream) std::fputc('\n', stdout);
  if (!st.ok()) return Fail(st);
  for (size_t i = 0; i < done.size() && !stream; ++i) {
    const Completion& c = done[i];
    if (!json) {
      if (per_prompt == 1) {
        std::printf("[%zu] %s\n", c.prompt_index, c.text.c_str());
      } else {
        std::printf("[%zu.%d] %s\n", c.prompt_index, c.sample_index, c.text.c_str());
      }
      continue;
    }
    nlohmann::json j;
    j["prompt_index"] = c.prompt_index;
    if (params.embed) {
      if (!prompt_ids[c.prompt_index].empty()) j["prompt_token_ids"] = prompt_ids[c.prompt_index];
      j["embedding"] = c.embedding;
      std::printf("%s\n", j.dump().c_str());
      continue;
    }
    j["sample_index"] = c.sample_index;
    j["text"] = c.text;
    j["token_ids"] = c.token_ids;
    if (!prompt_ids[c.prompt_index].empty()) j["prompt_token_ids"] = prompt_ids[c.prompt_index];
    if (params.UseBeamSearch()) j["cumulative_logprob"] = c.cumulative_logprob;
    j["finish_reason"] = std::string(FinishReasonName(c.finish));
    if (params.logprobs.has_value()) j["logprobs"] = LogprobsJson(c.logprobs);
    if (params.prompt_logprobs.has_value() && c.sample_index == 0) {
      j["prompt_logprobs"] = LogprobsJson(c.prompt_logprobs);
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return 0;
}

}  // namespace pagellm::cli
