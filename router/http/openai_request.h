// OpenAI-compatible request bodies (POST /v1/completions, /v1/chat/completions, /v1/embeddings)
// turned into
// the router's own GenerateRequests, which then take the same path as gRPC requests
// (validation, admission, a worker). This file checks only the JSON shape: names, types and the
// fields pagellm does not support; the values are validated where gRPC requests are.
//
// Every field is known by name: a field pagellm does not implement (`suffix`, `functions`, an
// image content part, ...) or does not know is refused with InvalidArgument
// naming it, never ignored. Errors carry the field's JSON path as the status payload
// kOpenAiParamPayload (the OpenAI error object's `param`).
//
// Thread-safe: pure functions.
#ifndef PAGELLM_ROUTER_HTTP_OPENAI_REQUEST_H_
#define PAGELLM_ROUTER_HTTP_OPENAI_REQUEST_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pagellm/v1/generation.pb.h"
#include "router/http/json_fields.h"
#include "router/http/openai_tools.h"

namespace pagellm {

// The status payload type URL under which errors carry the offending field's path.
inline constexpr absl::string_view kOpenAiParamPayload = openai::kParamPayload;
// Prompts one /v1/completions request may batch (each becomes its own generation).
inline constexpr int kMaxPromptsPerRequest = 64;
// Inputs one /v1/embeddings request may hold (OpenAI's limit; LangChain sends 1,000 at a time).
inline constexpr int kMaxEmbeddingInputs = 2048;
// Nesting of the JSON body (objects and arrays open at once): a structured-output JSON Schema
// (structured::kMaxSchemaDepth schemas deep, two JSON levels each) inside the request's own.
inline constexpr int kMaxJsonDepth = 72;
// `user`, `model` and other identifiers.
inline constexpr size_t kMaxIdentifierBytes = 256;

struct OpenAiRequest {
  enum class Kind { kCompletion, kChat, kEmbedding };
  Kind kind = Kind::kCompletion;
  std::string model;  // as the client named it; empty when absent
  // One per prompt; chat requests have exactly one. Sampling and prompt fields set.
  std::vector<v1::GenerateRequest> prompts;
  // Samples per prompt (choices = prompts.size() * n); with vLLM's use_beam_search, beams
  // (SamplingParams.beam_width), best first.
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt text starts each choice's text
  // Completions: `logprobs` (the N best alternatives per token; 0: only the chosen token's).
  // Chat: `top_logprobs` when `logprobs` is true. nullopt: no logprobs.
  std::optional<int> logprobs;
  // Completions: echo with logprobs: each choice's logprobs start with the prompt's tokens (the
  // first with null logprobs), scored by the worker (SamplingParams.prompt_logprobs).
  bool echo_logprobs = false;
  // Completions: echo with max_tokens 0: the choices hold the prompt alone (one token is
  // generated and dropped, as vLLM does; it is not counted in usage).
  bool echo_only = false;
  // vLLM's prompt_logprobs (not streamed): the prompt tokens' logprobs and the N best, in the
  // choice (completions) or the response (chat).
  std::optional<int> prompt_logprobs;
  // Chat: how the reply becomes tool calls (openai_tools.h).
  ToolChoice tool_choice;
  // vLLM's return_token_ids: each choice's generated token ids and the prompt's (completions: on
  // each choice; chat: on the response), streamed as deltas (the prompt's on the first chunk).
  bool return_token_ids = false;
  // Embeddings: encoding_format "base64" (little-endian fp32 bytes) rather than "float".
  bool base64 = false;
};

// InvalidArgument (with the param payload) for a body that is not a JSON object of the
// endpoint's fields with the right types.
absl::StatusOr<OpenAiRequest> ParseCompletionRequest(std::string_view body);
absl::StatusOr<OpenAiRequest> ParseChatRequest(std::string_view body);
// POST /v1/embeddings: {"model", "input": a string, strings, token ids or arrays of token ids (at
// most kMaxEmbeddingInputs), "encoding_format": "float" (default) or "base64" (what the openai
// SDKs ask for), "dimensions" (null only: the model has no matryoshka representation, as vLLM
// says), "user", and vLLM's "add_special_tokens" (true), "priority", "truncate_prompt_tokens"
// and "truncation_side"}. Each input becomes an embedding request (SamplingParams.embed).
absl::StatusOr<OpenAiRequest> ParseEmbeddingRequest(std::string_view body);

// POST /v1/score and POST /v1/rerank (vLLM's, for an embedding model: a pair's score is the
// cosine similarity of the two texts' embeddings).
//   score:  {"model", "text_1": a string or strings, "text_2": a string or strings}: one text_1
//           against each text_2, or text_1[i] against text_2[i] (lists of one length);
//   rerank: {"model", "query": a string, "documents": strings, "top_n" (0: all)}.
// Both take vLLM's "user", "add_special_tokens" and "priority"; at most kMaxEmbeddingInputs
// texts in all. Each distinct position embeds once (a query shared by every pair: once).
struct ScoreHttpRequest {
  OpenAiRequest embed;                     // the texts to embed (Kind::kEmbedding)
  std::vector<std::pair<int, int>> pairs;  // indices into embed.prompts, one score each
  bool rerank = false;
  std::vector<std::string> documents;  // rerank: echoed in the results
  int top_n = 0;                       // rerank: the best top_n results (0: all)
};
absl::StatusOr<ScoreHttpRequest> ParseScoreRequest(std::string_view body, bool rerank);

// POST /tokenize (vLLM's): {"model", "prompt", "add_special_tokens" (true)} or {"model",
// "messages", "add_generation_prompt", "chat_template_kwargs"} (add_special_tokens false: the
// template writes its own), and "return_token_strs". Errors as ParseChatRequest's.
struct TokenizeHttpRequest {
  std::string model;  // "" when not given
  v1::TokenizeRequest request;
  bool return_token_strs = false;
};
absl::StatusOr<TokenizeHttpRequest> ParseTokenizeRequest(std::string_view body);

// POST /detokenize (vLLM's): {"model", "tokens": [ids], "skip_special_tokens" (false)}.
struct DetokenizeHttpRequest {
  std::string model;
  v1::DetokenizeRequest request;
};
absl::StatusOr<DetokenizeHttpRequest> ParseDetokenizeRequest(std::string_view body);

// POST /v1/load_lora_adapter {"lora_name", "lora_path", "load_inplace" (false; true is refused:
// an adapter's weights never change under running requests)} and /v1/unload_lora_adapter
// {"lora_name"} (vLLM's runtime LoRA updating). The name follows --lora-modules' rules; the path
// (at most 4 KiB) is the workers' to resolve, inside their --lora-dir.
struct LoraChangeRequest {
  bool load = false;
  std::string lora_name;
  std::string lora_path;  // load only
};
absl::StatusOr<LoraChangeRequest> ParseLoraChangeRequest(std::string_view body, bool load);

// The field path an error names ("" when none).
std::string OpenAiParam(const absl::Status& status);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_OPENAI_REQUEST_H_
