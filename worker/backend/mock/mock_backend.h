// The mock backend (`--load-format mock`): no weights and no model arithmetic. Every logits row
// puts all mass on one token that depends only on the sequence's last token and position, so
// generation is deterministic, costs almost nothing, and still runs through the real engine,
// scheduler, block manager and sampler (the CPU one, over a 257-token vocabulary). For measuring
// the serving layers (the router's overhead, gRPC streaming) without a model in the way. Its
// tokenizer is a plain byte vocabulary.
#ifndef PAGELLM_WORKER_BACKEND_MOCK_MOCK_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_MOCK_MOCK_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/backend/backend.h"

namespace pagellm {

struct MockBackendOptions {
  int64_t block_size = 16;
  int64_t num_kv_blocks = 65536;
  int64_t max_batch_tokens = 8192;
  int64_t max_model_len = 8192;
  // Sleeps this long per Forward() to imitate compute (0: none).
  int64_t step_delay_us = 0;
  // LoRA adapter names it answers to (rows with an adapter compute as the base model).
  std::vector<std::string> adapter_names;
  // Adapter slots: adapter_names fill the first; the others take SetAdapter's (names only).
  int64_t max_loras = 0;
};

// A 257-token byte vocabulary: one token per byte plus <|endoftext|> (id 256, end of text).
absl::StatusOr<std::unique_ptr<Tokenizer>> MockTokenizer();

// The next token never is <|endoftext|>, so generation runs to max_tokens. InvalidArgument for
// non-positive sizes.
absl::StatusOr<std::unique_ptr<Backend>> CreateMockBackend(const MockBackendOptions& options);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_BACKEND_MOCK_MOCK_BACKEND_H_
