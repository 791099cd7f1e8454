// Per-request sampling and stopping parameters, with vLLM's semantics and defaults.
#ifndef PAGELLM_COMMON_SAMPLING_SAMPLING_PARAMS_H_
#define PAGELLM_COMMON_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace pagellm {

// The most top logprobs a request may ask for (OpenAI's and vLLM's default limit).
inline constexpr int kMaxLogprobs = 20;
// The most parallel samples or beams one request may ask for.
inline constexpr int kMaxParallelSamples = 256;

// Stop conditions a request may carry. Each sequence matches all of its request's stop strings
// with one shared automaton, so the per-token cost does not grow with their number; these caps
// bound the memory and build time per request and the text held back per sequence. OpenAI's API
// and TGI (--max-stop-sequences) allow 4 stop strings; vLLM sets no limit. 32 strings and 4 KiB
// cover every client we know of by a wide margin.
inline constexpr int kMaxStopStrings = 32;
inline constexpr int kMaxStopBytes = 4096;  // all stop strings together
inline constexpr int kMaxStopTokenIds = 64;
// repetition_penalty is limited to [1/kMaxRepetitionPenalty, kMaxRepetitionPenalty]: dividing
// and multiplying logits by more overflows float or removes every finite logit (no token can
// be sampled). HF, vLLM and llama.cpp users set values around 1.0-1.5.
inline constexpr float kMaxRepetitionPenalty = 100.0f;

// Temperatures below this sample greedily (vLLM's _SAMPLING_EPS): dividing logits by a tiny
// temperature only produces overflow, and the limit is argmax anyway.
inline constexpr float kGreedyTemperatureEps = 1e-5f;

// Structured output (vLLM's structured_outputs / guided decoding, OpenAI's response_format):
// the generated text is constrained, token by token, to a grammar (common/structured/). Bounds:
// a schema of at most kMaxStructuredBytes, at most kMaxChoices choices of at most
// kMaxStructuredBytes in total.
inline constexpr int kMaxStructuredBytes = 64 * 1024;
inline constexpr int kMaxChoices = 256;
// logit_bias entries (OpenAI's limit is on the order of hundreds) and allowed_token_ids.
inline constexpr int kMaxLogitBias = 1024;
inline constexpr int kMaxAllowedTokenIds = 65536;
inline constexpr float kMaxLogitBiasValue = 100.0f;  // OpenAI's range: [-100, 100]

struct StructuredOutput {
  enum class Kind {
    kNone,
    kJsonSchema,  // a JSON value valid under json_schema (a JSON Schema document)
    kJsonObject,  // any JSON object
    kChoice,      // exactly one of choices
    kRegex,       // a full match of regex
    kGrammar,     // a match of grammar (GBNF)'s root rule
  };
  Kind kind = Kind::kNone;
  std::string json_schema = {};
  std::string regex = {};
  std::string grammar = {};
  std::vector<std::string> choices = {};

  [[nodiscard]] bool enabled() const { return kind != Kind::kNone; }
  // The sizes and encodings within limits (SamplingParams::Validate's part for it); whether the
  // schema, pattern or grammar compiles is the compiler's to say.
  [[nodiscard]] absl::Status Validate() const;
  // Equal keys describe the same grammar (for caching compiled grammars).
  [[nodiscard]] std::string CacheKey() const;
};

// The longest LoRA adapter name a request may give (what --lora-modules accepts).
inline constexpr size_t kMaxLoraAdapterNameBytes = 128;
// The longest cache_salt.
inline constexpr size_t kMaxCacheSaltBytes = 1024;

// A name an adapter may be served under: 1..kMaxLoraAdapterNameBytes bytes of [A-Za-z0-9._:/-]
// (names appear in /v1/models, URLs and metric labels). InvalidArgument naming `what` otherwise.
absl::Status CheckLoraAdapterName(std::string_view name, std::string_view what);

// A plain value type: copy freely. Call Validate() on every request before using it; the sampler
// and stop checker assume a valid object.
struct SamplingParams {
  // Divides the logits before softmax. 0 (below kGreedyTemperatureEps) means greedy: argmax,
  // ties to the lowest token id; top_k/top_p/min_p and the seed are then ignored.
  float temperature = 1.0f;
  // Nucleus sampling: keep the smallest set of most likely tokens whose mass reaches top_p.
  // 1 disables. Must be in (0, 1].
  float top_p = 1.0f;
  // Keep only the top_k most likely tokens. 0 or -1 disables.
  int32_t top_k = 0;
  // Drop tokens whose probability is below min_p times the most likely token's. 0 disables.
  float min_p = 0.0f;
  // HF/vLLM style, over tokens seen in prompt or output: positive logits are divided by it,
  // negative ones multiplied. 1 disables. In [1/kMaxRepetitionPenalty, kMaxRepetitionPenalty].
  float repetition_penalty = 1.0f;
  // OpenAI style, over output tokens only: logit -= presence_penalty * (count > 0)
  // and logit -= frequency_penalty * count. In [-2, 2].
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Fixes the request's random stream: the draw for output position i depends only on (seed, i).
  // Unset: the engine draws a random seed once when the request is created.
  std::optional<uint64_t> seed = std::nullopt;
  // Generate at most max_tokens tokens (finish reason "length"); at least 1.
  int32_t max_tokens = 16;
  // The first min_tokens tokens can never be EOS or a stop token, and no stop string ends the
  // request before min_tokens tokens exist. 0 <= min_tokens <= max_tokens.
  int32_t min_tokens = 0;
  // Keep generating past the model's EOS token(s) (stop_token_ids still apply).
  bool ignore_eos = false;
  // Extra token ids that finish the request with reason "stop". At most kMaxStopTokenIds.
  std::vector<int32_t> stop_token_ids = {};
  // Strings (UTF-8, non-empty) that finish the request with reason "stop". The output is cut
  // before the string unless include_stop_str_in_output. At most kMaxStopStrings, of at most
  // kMaxStopBytes in total.
  std::vector<std::string> stop = {};
  // Keep the matched stop string, or the text of the stop/EOS token, in the output.
  bool include_stop_str_in_output = false;
  // Unset: no logprobs. N: the sampled token's logprob plus the N most likely tokens'
  // (0 = the sampled token's only). At most kMaxLogprobs.
  std::optional<int32_t> logprobs = std::nullopt;
  // Unset: none. N: for every prompt token after the first, its logprob given the tokens before
  // it, its rank, and the N most likely tokens' logprobs (vLLM's prompt_logprobs; the OpenAI
  // completions API's echo with logprobs). At most kMaxLogprobs. The prompt is then computed in
  // full: cached prefix blocks are not reused for it (their logits were never kept).
  std::optional<int32_t> prompt_logprobs = std::nullopt;
  // Leave special tokens out of the detokenized text (used by the detokenizer).
  bool skip_special_tokens = true;
  // Parallel samples: the prompt is computed once and its KV blocks shared; sample i draws from
  // its own stream (the request's seed for i = 0, a seed derived from it and i otherwise).
  // In [1, kMaxParallelSamples]. Must be 1 with beam search.
  int32_t n = 1;
  // OpenAI's logit_bias: added to these tokens' logits before penalties (and before anything
  // else the sampler does; logprobs stay those of the raw model). Ids in the vocabulary, at
  // most kMaxLogitBias entries, values in [-100, 100]; sorted by id, unique.
  std::vector<std::pair<int32_t, float>> logit_bias = {};
  // vLLM's allowed_token_ids: when not empty, only these tokens may be sampled (EOS too only if
  // listed). At most kMaxAllowedTokenIds ids in the vocabulary.
  std::vector<int32_t> allowed_token_ids = {};
  // Constrains the output; when it is complete and nothing may follow, the sequence ends
  // (reason stop) without sampling an EOS. Not with beam search.
  StructuredOutput structured_output = {};
  // Beam search of this width when >= 2 (0 or 1: off). Returns beam_width completions, best
  // first. Needs temperature 0; stop strings and logprobs are not supported with it.
  int32_t beam_width = 0;
  // Beam score = cumulative logprob / generated_length ^ length_penalty (HF semantics).
  float length_penalty = 1.0f;
  // Stop the beam search as soon as beam_width hypotheses have finished (true), or only when no
  // running beam can beat the worst of them (false, HF's default).
  bool early_stopping = false;
  // At most kMaxLoraAdapterNameBytes. Not a sampling parameter, but it travels with them: the LoRA
  // adapter (its served name) the request runs with; empty for the base model. The engine refuses a
  // name its backend does not serve (NotFound).
  std::string lora_adapter = {};
  // Not a sampling parameter: vLLM's cache_salt (at most kMaxCacheSaltBytes). When not empty,
  // the prompt shares cached prefix blocks only with requests of the same salt (and adapter).
  std::string cache_salt = {};
  // Not a sampling parameter either: under --scheduling-policy priority, a request with a smaller
  // value is scheduled (and, in the router, placed) first, and one with a larger value is
  // preempted first; ties go by arrival (vLLM's priority). Any value; the engine refuses a
  // nonzero one under fcfs.
  int32_t priority = 0;
  // Not a sampling parameter: an embedding request (vLLM's pooling of a generative model with
  // pooling type LAST, normalized). Nothing is generated: the engine computes the prompt and
  // returns its last position's final hidden state (the final norm's output), L2-normalized.
  // The other sampling fields are ignored, except that n > 1, beam search, logprobs, prompt
  // logprobs and structured output are refused with it (they describe generated tokens).
  bool embed = false;

  // Returns OK, or InvalidArgument naming the first bad field and its value. vocab_size is the
  // model's logits width; token ids must lie in [0, vocab_size).
  [[nodiscard]] absl::Status Validate(int64_t vocab_size) const;

  // The tokens the request's sequence can reach: the prompt, plus max_tokens unless it embeds.
  [[nodiscard]] int64_t MaxContext(int64_t prompt_len) const {
    return prompt_len + (embed ? 0 : max_tokens);
  }
  // OK when MaxContext(prompt_len) <= max_model_len; otherwise InvalidArgument giving the numbers.
  [[nodiscard]] absl::Status CheckContext(int64_t prompt_len, int64_t max_model_len) const;

  [[nodiscard]] bool UseBeamSearch() const { return beam_width >= 2; }
  // Sequences the request runs at once after its first token: n, or the beam width.
  [[nodiscard]] int32_t NumSequences() const { return UseBeamSearch() ? beam_width : n; }

  // True when the sampler picks the argmax.
  [[nodiscard]] bool IsGreedy() const { return temperature < kGreedyTemperatureEps; }
};

}  // namespace pagellm

#endif  // PAGELLM_COMMON_SAMPLING_SAMPLING_PARAMS_H_
