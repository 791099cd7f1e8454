#include "worker/backend/step_arrays.h"

#include <algorithm>

namespace pagellm {

void StepArrays::AddRow(std::span<const int32_t> tokens, int64_t cached,
                        std::span<const int32_t> blocks, int64_t logits_from, int32_t adapter) {
  const int32_t row = static_cast<int32_t>(seq_lens_.size());
  tables_.resize(tables_.size() + stride_, 0);
  std::copy(blocks.begin(), blocks.end(), tables_.end() - stride_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t p = cached + static_cast<int64_t>(i);
    if (logits_from >= 0 && p >= logits_from) logits_.push_back(static_cast<int32_t>(ids_.size()));
    ids_.push_back(tokens[i]);
    pos_.push_back(static_cast<int32_t>(p));
    seq_.push_back(row);
    slots_.push_back(static_cast<int64_t>(blocks[p / block_size_]) * block_size_ + p % block_size_);
  }
  if (logits_from < 0) logits_.push_back(static_cast<int32_t>(ids_.size()) - 1);
  query_start_.push_back(static_cast<int32_t>(ids_.size()));
  seq_lens_.push_back(static_cast<int32_t>(cached + static_cast<int64_t>(tokens.size())));
  adapters_.push_back(adapter);
  any_adapter_ = any_adapter_ || adapter >= 0;
}

void StepArrays::Clear() {
  ids_.clear();
  pos_.clear();
  seq_.clear();
  query_start_.assign(1, 0);
  seq_lens_.clear();
  tables_.clear();
  logits_.clear();
  slots_.clear();
  adapters_.clear();
  any_adapter_ = false;
}

ForwardBatch StepArrays::batch() const {
  ForwardBatch b;
  b.num_tokens = static_cast<int64_t>(ids_.size());
  b.token_ids = ids_.data();
  b.positions = pos_.data();
  b.token_seq = seq_.data();
  b.slots = slots_.data();
  b.num_seqs = static_cast<int64_t>(seq_lens_.size());
  b.query_start = query_start_.data();
  b.seq_lens = seq_lens_.data();
  b.block_tables = tables_.data();
  b.block_table_stride = stride_;
  b.num_logits = static_cast<int64_t>(logits_.size());
  b.logit_indices = logits_.data();
  b.all_decode = b.num_tokens == b.num_seqs && b.num_logits == b.num_tokens;
  b.seq_adapter = any_adapter_ ? adapters_.data() : nullptr;
  return b;
}

}  // namespace pagellm
