// libFuzzer target for the OpenAI-compatible request bodies (router/http/openai_request.h): the
// bytes go to ParseCompletionRequest, ParseChatRequest, ParseResponsesRequest
// (router/http/responses_api.h: a chat request) and ParseLoraChangeRequest (load and unload).
//
// Invariants (abort() when one fails): an error is InvalidArgument; a parsed request has 1 to
// kMaxPromptsPerRequest prompts (a chat request exactly one, with a chat prompt), n >= 1, and
// `stream_options` only with `stream`; its GenerateRequests serialize and parse back unchanged.
// A parsed LoRA change has a name CheckLoraAdapterName accepts and, to load, a path of 1 to
// 4,096 bytes.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/openai_request_fuzz/;
// dictionary tools/fuzz/openai_request.dict).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/sampling/sampling_params.h"
#include "router/http/openai_request.h"
#include "router/http/responses_api.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

void Check(const absl::StatusOr<pagellm::OpenAiRequest>& r, bool chat) {
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(!r->prompts.empty());
  FUZZ_CHECK(r->prompts.size() <= static_cast<size_t>(pagellm::kMaxPromptsPerRequest));
  FUZZ_CHECK(!chat || (r->prompts.size() == 1 && r->prompts[0].has_chat()));
  FUZZ_CHECK(r->n >= 1);
  FUZZ_CHECK(r->stream || !r->include_usage);
  for (const pagellm::v1::GenerateRequest& g : r->prompts) {
    const std::string bytes = g.SerializeAsString();
    pagellm::v1::GenerateRequest back;
    FUZZ_CHECK(back.ParseFromString(bytes));
    FUZZ_CHECK(back.SerializeAsString() == bytes);
  }
}

void CheckLoraChange(const absl::StatusOr<pagellm::LoraChangeRequest>& r, bool load) {
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(r->load == load);
  FUZZ_CHECK(pagellm::CheckLoraAdapterName(r->lora_name, "lora_name").ok());
  FUZZ_CHECK(!load || (!r->lora_path.empty() && r->lora_path.size() <= 4096));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Check(pagellm::ParseCompletionRequest(body), /*chat=*/false);
  Check(pagellm::ParseChatRequest(body), /*chat=*/true);
  absl::StatusOr<pagellm::ResponsesRequest> responses = pagellm::ParseResponsesRequest(body);
  if (responses.ok()) {
    FUZZ_CHECK(responses->chat.kind == pagellm::OpenAiRequest::Kind::kChat);
    FUZZ_CHECK(responses->chat.n == 1);
    Check(responses->chat, /*chat=*/true);
  } else {
    FUZZ_CHECK(responses.status().code() == absl::StatusCode::kInvalidArgument);
  }
  CheckLoraChange(pagellm::ParseLoraChangeRequest(body, /*load=*/true), true);
  CheckLoraChange(pagellm::ParseLoraChangeRequest(body, /*load=*/false), false);
  return 0;
}
