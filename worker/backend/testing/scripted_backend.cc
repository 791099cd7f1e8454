// The simulated pool: a step first writes each token's id into its slot (as the model writes
// K/V), then reads each wanted token's context back through its row of the block table (as
// attention does). An unwritten slot reads -1, which no rule maps to a valid context.
#include "worker/backend/testing/scripted_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm::testing {

ScriptedBackend::ScriptedBackend(const ScriptedBackendOptions& o)
    : options_(o),
      device_(o.num_kv_blocks * o.block_size, -1),
      swap_(o.num_swap_blocks * o.block_size, -1),
      sampler_(o.vocab_size) {
  config_.architecture = "scripted";
  config_.vocab_size = o.vocab_size;
  config_.max_position_embeddings = o.max_model_len;
  config_.hidden_size = kHiddenSize;
  rule_ = [this](std::span<const int32_t> context, std::span<float> row) {
    std::fill(row.begin(), row.end(), 0.0f);
    row[NextToken(context)] = 20.0f;
  };
}

int32_t ScriptedBackend::NextToken(std::span<const int32_t> context) const {
  int64_t sum = 0;
  for (int32_t t : context) sum += t;
  return static_cast<int32_t>((31 * sum + 7 * static_cast<int64_t>(context.size())) %
                              (options_.vocab_size - 1));
}

std::vector<float> ScriptedBackend::HiddenOf(std::span<const int32_t> context) {
  int64_t sum = 0;
  for (int32_t t : context) sum += t;
  return {static_cast<float>(context.size()), static_cast<float>(sum),
          context.empty() ? 0.0f : static_cast<float>(context.back()), 1.0f};
}

std::vector<int32_t> ScriptedBackend::Continue(std::vector<int32_t> prompt, int n) const {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(NextToken(prompt));
    prompt.push_back(out.back());
  }
  return out;
}

absl::Status ScriptedBackend::ForwardLogits(const ForwardBatch& batch, float* logits) {
  ++forward_calls_;
  if (step_hook_) step_hook_();
  if (forward_failure_.has_value()) {
    absl::Status st = *std::move(forward_failure_);
    forward_failure_.reset();
    return st;
  }
  RETURN_IF_ERROR(ValidateForwardBatch(
      batch, {options_.max_batch_tokens, options_.num_kv_blocks, options_.block_size,
              options_.vocab_size, options_.max_model_len, options_.adapter_slots}));
  all_decode_steps_ += batch.all_decode;
  max_tokens_in_a_step_ = std::max(max_tokens_in_a_step_, batch.num_tokens);
  for (int64_t t = 0; t < batch.num_tokens; ++t) device_[batch.slots[t]] = batch.token_ids[t];
  const int64_t bs = options_.block_size;
  hidden_.clear();
  for (int64_t r = 0; r < batch.num_logits; ++r) {
    const int32_t t = batch.logit_indices[r];
    const int32_t* table = batch.block_tables + batch.token_seq[t] * batch.block_table_stride;
    context_.clear();
    for (int32_t p = 0; p <= batch.positions[t]; ++p) {
      context_.push_back(device_[static_cast<int64_t>(table[p / bs]) * bs + p % bs]);
    }
    if (std::find(context_.begin(), context_.end(), -1) != context_.end()) {
      return absl::InternalError(absl::StrCat("logits row ", r, " reads a KV slot never written"));
    }
    rule_(context_, std::span<float>(logits + r * options_.vocab_size, options_.vocab_size));
    const std::vector<float> hidden = hidden_rule_(context_);
    hidden_.insert(hidden_.end(), hidden.begin(), hidden.end());
  }
  return absl::OkStatus();
}

absl::Status ScriptedBackend::FinalHidden(std::span<const int32_t> rows, float* out) {
  const int64_t have = static_cast<int64_t>(hidden_.size()) / kHiddenSize;
  for (int32_t r : rows) {
    if (r < 0 || r >= have) {
      return absl::InvalidArgumentError(absl::StrCat("hidden state of row ", r, " of ", have));
    }
    out = std::copy_n(hidden_.begin() + r * kHiddenSize, kHiddenSize, out);
  }
  return absl::OkStatus();
}

absl::Status ScriptedBackend::Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                                      SamplerOutput* out) {
  RETURN_IF_ERROR(ForwardLogits(batch, sampler_.Logits(batch.num_logits)));
  return sampler_.Sample(batch.num_logits, sampling, out);
}

absl::Status ScriptedBackend::CopyKv(std::span<const KvCopy> copies) {
  if (copy_failure_.has_value()) {
    absl::Status st = *std::move(copy_failure_);
    copy_failure_.reset();
    return st;
  }
  const int64_t bs = options_.block_size;
  for (const KvCopy& c : copies) {
    const std::vector<int32_t>& from = c.kind == KvCopy::Kind::kSwapToDevice ? swap_ : device_;
    std::vector<int32_t>& to = c.kind == KvCopy::Kind::kDeviceToSwap ? swap_ : device_;
    const int64_t from_blocks = static_cast<int64_t>(from.size()) / bs;
    const int64_t to_blocks = static_cast<int64_t>(to.size()) / bs;
    if (c.src < 0 || c.src >= from_blocks || c.dst < 0 || c.dst >= to_blocks) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV copy ", c.src, " -> ", c.dst, " outside the pools"));
    }
    std::copy_n(from.begin() + c.src * bs, bs, to.begin() + c.dst * bs);
    ++copies_;
  }
  return absl::OkStatus();
}

absl::Status ScriptedBackend::SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) {
  RETURN_IF_ERROR(adapters_.Check(slot, adapter.get()));
  adapters_.Set(slot, adapter.get());
  return absl::OkStatus();
}

}  // namespace pagellm::testing
