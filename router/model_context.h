// ModelContext: what the router knows about the served model, fetched from a worker at start:
// its ModelInfo, the tokenizer built from the worker's TokenizerSpec, and the chat template.
//
// Immutable after Create(); thread-safe to share by const reference.
#ifndef PAGELLM_ROUTER_MODEL_CONTEXT_H_
#define PAGELLM_ROUTER_MODEL_CONTEXT_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"
#include "pagellm/v1/generation.pb.h"
#include "pagellm/v1/worker.pb.h"
#include "router/chat_renderer.h"

namespace pagellm {

class ModelContext {
 public:
  // Builds the tokenizer (and the chat renderer when info.chat_template is non-empty).
  // InvalidArgument when the spec or the info is unusable (no vocabulary, max_model_len <= 0).
  // A template that does not parse is not an error: chat prompts are then refused with the
  // reason (chat_status()).
  static absl::StatusOr<std::unique_ptr<ModelContext>> Create(const v1::ModelInfo& info,
                                                              const v1::TokenizerSpec& spec);

  // For tests: a context over an already built tokenizer and an optional renderer.
  // REQUIRES: tokenizer != nullptr.
  static std::unique_ptr<ModelContext> TEST_Create(v1::ModelInfo info,
                                                   std::unique_ptr<Tokenizer> tokenizer,
                                                   std::unique_ptr<ChatRenderer> chat);

  ModelContext(const ModelContext&) = delete;
  ModelContext& operator=(const ModelContext&) = delete;

  [[nodiscard]] const v1::ModelInfo& info() const { return info_; }
  [[nodiscard]] const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Null when chat prompts cannot be served; chat_status() then says why.
  [[nodiscard]] const ChatRenderer* chat() const { return chat_.get(); }
  [[nodiscard]] const absl::Status& chat_status() const { return chat_status_; }
  // Token ids must lie in [0, vocab_size()): the model's logits width (info.vocab_size), or
  // the tokenizer's size when the info leaves it 0.
  [[nodiscard]] int32_t vocab_size() const { return vocab_size_; }
  // The most n or beam_width a request may ask for.
  [[nodiscard]] int32_t max_parallel_samples() const { return max_parallel_samples_; }

 private:
  ModelContext() = default;

  v1::ModelInfo info_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatRenderer> chat_;
  absl::Status chat_status_;
  int32_t vocab_size_ = 0;
  int32_t max_parallel_samples_ = 0;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_MODEL_CONTEXT_H_
