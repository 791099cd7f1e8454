// Limits on what a client controls in a request, shared by the router and the worker, and the
// helpers that keep error messages about client values short.
//
// Every size a client sends is bounded here or where it is parsed (sampling_params.h for stop
// conditions, n and logprobs; the model's max_model_len for prompts), so one request's memory
// and time are bounded and an error about a long value is INVALID_ARGUMENT, never a gRPC
// metadata overflow (RESOURCE_EXHAUSTED) caused by quoting it.
//
// Thread-safe: constants and pure functions.
#ifndef PAGELLM_COMMON_API_REQUEST_LIMITS_H_
#define PAGELLM_COMMON_API_REQUEST_LIMITS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pagellm {

// A request message on the wire (gRPC's receive limit on the router and the worker; gRPC's own
// default). The worker's requests are token ids, far below it.
inline constexpr int kMaxRequestBytes = 4 << 20;
// A client's request_id; it is echoed in every streamed message. (vLLM and TGI use UUIDs: 36.)
inline constexpr size_t kMaxRequestIdBytes = 256;
// The request id the worker accepts: the client's plus the router's "@<process><seq>" suffix.
inline constexpr size_t kMaxWorkerRequestIdBytes = kMaxRequestIdBytes + 64;
// A chat message's role ("system", "user", "assistant", "tool", ...).
inline constexpr size_t kMaxRoleBytes = 64;
// Messages in one chat prompt.
inline constexpr int kMaxChatMessages = 4096;
// Functions one chat prompt may offer the model (OpenAI's limit), and calls one message may
// carry.
inline constexpr int kMaxTools = 128;
inline constexpr int kMaxToolCallsPerMessage = 128;
// Nesting of a tool's parameter schema or a call's arguments (the template sees them within
// three more levels, under chat_template::kMaxKwargsDepth).
inline constexpr int kMaxToolJsonDepth = 24;
// A tool's or a call's name and a call's id.
inline constexpr size_t kMaxToolNameBytes = 256;
// The longest error message sent to a client; longer ones are cut (at a UTF-8 boundary).
inline constexpr size_t kMaxErrorMessageBytes = 1024;
// How much of a client's value an error message quotes.
inline constexpr size_t kMaxQuotedBytes = 40;

// Returns `value` in double quotes, cut to kMaxQuotedBytes at a UTF-8 boundary with "..." and
// its size in bytes appended when longer: "\"abc...\" (2097152 bytes)".
std::string QuoteClientValue(absl::string_view value);

// `message` cut to kMaxErrorMessageBytes at a UTF-8 boundary (with "..." when cut).
std::string BoundedErrorMessage(absl::string_view message);

// InvalidArgument naming `field` when `value` is longer than `max_bytes`.
absl::Status CheckMaxBytes(absl::string_view value, size_t max_bytes, absl::string_view field);

}  // namespace pagellm

#endif  // PAGELLM_COMMON_API_REQUEST_LIMITS_H_
