// Request validation: turns a client's prompt into token ids and checks the request against the
// model's limits before it is queued, so that a worker only sees requests it can run.
//
// All functions are pure (no I/O, no shared state) and thread-safe.
#ifndef PAGELLM_ROUTER_REQUEST_VALIDATOR_H_
#define PAGELLM_ROUTER_REQUEST_VALIDATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sampling/sampling_params.h"
#include "pagellm/v1/generation.pb.h"
#include "router/model_context.h"

namespace pagellm {

struct EncodedPrompt {
  std::vector<int32_t> ids;
  std::string rendered;  // chat prompts: the template's output; empty otherwise
};

// Encodes a text prompt: Encode(text, add_special_tokens, parse_special=false).
// InvalidArgument when `text` is not valid UTF-8 or longer than model.max_prompt_bytes()
// (`field` names it in the message).
absl::StatusOr<EncodedPrompt> EncodeText(const ModelContext& model, const std::string& text,
                                         bool add_special_tokens, const char* field);

// Renders a chat prompt with the model's template and encodes the result so that only the
// template's own markup produces control tokens: each role and content is marked
// (Tokenizer::MarkUntrusted) before rendering and tokenized as plain text (EncodeMarked), so a
// message cannot forge a turn. InvalidArgument for invalid UTF-8, more than kMaxChatMessages
// messages, a role past kMaxRoleBytes, messages past model.max_prompt_bytes() in total, or a
// conversation the template rejects (the template's message); FailedPrecondition when the model
// has no usable template.
absl::StatusOr<EncodedPrompt> EncodeChat(const ModelContext& model, const v1::ChatPrompt& chat,
                                         const char* field);

// A Generate request ready for a worker.
struct ValidatedRequest {
  std::vector<int32_t> prompt_ids;  // non-empty, each in [0, vocab)
  SamplingParams params;            // valid for the model
  // What the worker is sent: the request's sampling with what it left unset filled in as
  // `params` has it (the model's default sampling parameters, max_tokens).
  v1::SamplingParams sampling;
};

// Returns the prompt's ids (truncated as truncate_prompt_tokens asks) and the parsed sampling
// parameters, or InvalidArgument naming the first problem: a request_id past
// kMaxRequestIdBytes, no or empty prompt, invalid UTF-8, ids outside the vocabulary, a bad
// truncate_prompt_tokens, bad sampling parameters (SamplingParams::Validate), n / beam_width above
// the model's max_parallel_samples, prompt + max_tokens above max_model_len (the message gives the
// numbers). FailedPrecondition for a chat prompt to a model without a template.
absl::StatusOr<ValidatedRequest> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                         const ModelContext& model);

// The Tokenize and Detokenize APIs (gRPC and HTTP): the prompt's ids as a Generate request
// would see them (and a chat's rendered text), or the text of ids. InvalidArgument as for
// EncodeText / EncodeChat, for no input, more ids than max_model_len or ids outside the vocab.
absl::Status AnswerTokenize(const ModelContext& model, const v1::TokenizeRequest& request,
                            v1::TokenizeResponse* response);
absl::Status AnswerDetokenize(const ModelContext& model, const v1::DetokenizeRequest& request,
                              v1::DetokenizeResponse* response);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_REQUEST_VALIDATOR_H_
