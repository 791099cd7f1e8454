#include "worker/backend/mock/mock_backend.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer/byte_level.h"
#include "worker/backend/adapter_slots.h"
#include "worker/backend/cpu/host_sampler.h"

namespace pagellm {
namespace {

constexpr int64_t kVocab = 257;
constexpr int64_t kHidden = 8;

class MockBackend : public Backend {
 public:
  explicit MockBackend(const MockBackendOptions& o) : options_(o) {
    config_.architecture = "mock";
    config_.vocab_size = kVocab;
    config_.max_position_embeddings = o.max_model_len;
    config_.hidden_size = kHidden;
  }
  const ModelConfig& config() const override { return config_; }
  std::string name() const override { return "mock"; }
  int64_t block_size() const override { return options_.block_size; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t num_kv_blocks() const override { return options_.num_kv_blocks; }
  int64_t num_swap_blocks() const override { return 0; }
  const std::vector<std::string>& adapter_names() const override { return adapters_.names(); }
  bool adapters_can_change() const override { return true; }
  absl::Status SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) override {
    RETURN_IF_ERROR(adapters_.Check(slot, adapter.get()));
    adapters_.Set(slot, adapter.get());
    return absl::OkStatus();
  }
  absl::Status CopyKv(std::span<const KvCopy>) override { return absl::OkStatus(); }

  absl::Status Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                       SamplerOutput* out) override {
    RETURN_IF_ERROR(ForwardLogits(batch, sampler_.Logits(batch.num_logits)));
    return sampler_.Sample(batch.num_logits, sampling, out);
  }

  absl::Status ForwardLogits(const ForwardBatch& batch, float* logits) override {
    if (batch.num_tokens > options_.max_batch_tokens) {
      return absl::InvalidArgumentError("batch larger than max_batch_tokens");
    }
    last_.clear();
    for (int64_t r = 0; r < batch.num_logits; ++r) {
      const int32_t i = batch.logit_indices[r];
      last_.emplace_back(batch.token_ids[i], batch.positions[i]);
      // Printable ASCII, a function of the last token and its position.
      const int32_t next = 32 + (batch.token_ids[i] * 7 + batch.positions[i]) % 95;
      float* row = logits + r * kVocab;
      std::fill(row, row + kVocab, 0.0f);
      row[next] = 30.0f;
    }
    if (options_.step_delay_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(options_.step_delay_us));
    }
    return absl::OkStatus();
  }

  // Hidden states, like the logits, are a function of the row's last token and position.
  absl::Status FinalHidden(std::span<const int32_t> rows, float* out) override {
    for (int32_t r : rows) {
      if (r < 0 || r >= static_cast<int32_t>(last_.size())) {
        return absl::InvalidArgumentError(absl::StrCat("hidden state of row ", r));
      }
      for (int64_t j = 0; j < kHidden; ++j) {
        *out++ = static_cast<float>((last_[r].first * (j + 1) + last_[r].second) % 17) - 8.0f;
      }
    }
    return absl::OkStatus();
  }

 private:
  MockBackendOptions options_;
  AdapterSlots adapters_{options_.adapter_names, options_.max_loras};
  std::vector<std::pair<int32_t, int32_t>> last_;  // (token, position) of each logits row
  ModelConfig config_;
  HostSampler sampler_{kVocab};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MockTokenizer() {
  VocabSpec spec;
  spec.model = VocabModel::kByteLevelBpe;
  for (int b = 0; b < 256; ++b) {
    std::string text;
    ByteLevelEncode(std::string(1, static_cast<char>(b)), &text);
    spec.tokens.push_back(text);
  }
  spec.tokens.push_back("<|endoftext|>");
  spec.token_types.assign(256, TokenType::kNormal);
  spec.token_types.push_back(TokenType::kControl);
  spec.eos_id = 256;
  return Tokenizer::Create(std::move(spec));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateMockBackend(const MockBackendOptions& o) {
  if (o.block_size <= 0 || o.num_kv_blocks <= 0 || o.max_batch_tokens <= 0 ||
      o.max_model_len <= 0 || o.step_delay_us < 0) {
    return absl::InvalidArgumentError("mock backend sizes must be positive");
  }
  return std::unique_ptr<Backend>(new MockBackend(o));
}

}  // namespace pagellm
