// ModelContext: what the router knows about the served model, fetched from a worker at start:
// its ModelInfo, the tokenizer built from the worker's TokenizerSpec, and the chat template.
//
// Immutable after Create() except for the limits that follow the workers (max_model_len,
// max_parallel_samples: SetLimits, atomics); thread-safe to share by const reference.
#ifndef PAGELLM_ROUTER_MODEL_CONTEXT_H_
#define PAGELLM_ROUTER_MODEL_CONTEXT_H_

#include <atomic>
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
  [[nodiscard]] int32_t max_parallel_samples() const {
    return max_parallel_samples_.load(std::memory_order_relaxed);
  }
  // prompt + max_tokens may not exceed it. info().max_model_len() until SetLimits.
  [[nodiscard]] int32_t max_model_len() const {
    return max_model_len_.load(std::memory_order_relaxed);
  }
  // The longest prompt text (or chat, all messages together) worth tokenizing: max_model_len + 1
  // tokens of the tokenizer's longest piece. Longer text cannot fit the model, so it is refused
  // before any tokenizing work is spent on it.
  [[nodiscard]] int64_t max_prompt_bytes() const {
    return (static_cast<int64_t>(max_model_len()) + 1) * longest_piece_bytes_;
  }
  // The limits of the workers now serving (the smallest among them); values <= 0 are ignored.
  void SetLimits(int32_t max_model_len, int32_t max_parallel_samples);
  // info() with the current limits.
  [[nodiscard]] v1::ModelInfo CurrentInfo() const;

 private:
  ModelContext() = default;

  v1::ModelInfo info_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatRenderer> chat_;
  absl::Status chat_status_;
  int32_t vocab_size_ = 0;
  std::atomic<int32_t> max_parallel_samples_{0};
  std::atomic<int32_t> max_model_len_{0};
  int64_t longest_piece_bytes_ = 1;
};

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_MODEL_CONTEXT_H_
