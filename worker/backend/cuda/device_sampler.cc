#include "worker/backend/cuda/device_sampler.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm::cuda {
namespace {

using kernels::cuda::GreedyResult;
using kernels::cuda::GreedyRow;

bool OnDevice(const SamplingRow& row) {
  const SamplingParams& p = *row.seq.params;
  return row.num_top_candidates == 0 && p.IsGreedy() && p.repetition_penalty == 1.0f &&
         p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f;
}

}  // namespace

absl::Status DeviceSampler::Reserve(int64_t rows, int64_t suppressed) {
  if (rows > row_capacity_) {
    const int64_t cap = std::max<int64_t>(rows, 2 * row_capacity_);
    ASSIGN_OR_RETURN(rows_host_, PinnedBuffer::Allocate(cap * sizeof(GreedyRow), "sampling"));
    ASSIGN_OR_RETURN(rows_device_, DeviceBuffer::Allocate(cap * sizeof(GreedyRow), "sampling"));
    ASSIGN_OR_RETURN(results_host_, PinnedBuffer::Allocate(cap * sizeof(GreedyResult), "sampling"));
    ASSIGN_OR_RETURN(results_device_,
                     DeviceBuffer::Allocate(cap * sizeof(GreedyResult), "sampling"));
    row_capacity_ = cap;
  }
  if (suppressed > suppress_capacity_) {
    const int64_t cap = std::max<int64_t>(suppressed, 2 * suppress_capacity_);
    ASSIGN_OR_RETURN(suppress_host_, PinnedBuffer::Allocate(cap * 4, "sampling"));
    ASSIGN_OR_RETURN(suppress_device_, DeviceBuffer::Allocate(cap * 4, "sampling"));
    suppress_capacity_ = cap;
  }
  return absl::OkStatus();
}

absl::Status DeviceSampler::Sample(const float* logits, int64_t num_logits,
                                   const SamplingBatch& sampling, SamplerOutput* out) {
  for (const SamplingRow& row : sampling.rows) {
    if (row.logits_row < 0 || row.logits_row >= num_logits || row.num_top_candidates < 0 ||
        row.num_top_candidates > vocab_ || row.seq.params == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampling: a row reads logits row ", row.logits_row, " of ", num_logits,
                       " and wants ", row.num_top_candidates, " candidates"));
    }
  }
  for (int32_t id : sampling.eos_token_ids) {
    if (id < 0 || id >= vocab_) return absl::InvalidArgumentError("sampling: EOS id outside vocab");
  }
  device_rows_.clear();
  suppress_.clear();
  device_index_.clear();
  host_index_.clear();
  logits_row_needed_.assign(num_logits, 0);
  for (size_t i = 0; i < sampling.rows.size(); ++i) {
    const SamplingRow& row = sampling.rows[i];
    if (!OnDevice(row)) {
      host_index_.push_back(static_cast<int32_t>(i));
      logits_row_needed_[row.logits_row] = 1;
      continue;
    }
    const SamplingParams& p = *row.seq.params;
    GreedyRow g;
    g.logits_row = row.logits_row;
    g.suppress_begin = static_cast<int32_t>(suppress_.size());
    if (static_cast<int64_t>(row.seq.output_ids.size()) < p.min_tokens) {
      if (!p.ignore_eos) {
        suppress_.insert(suppress_.end(), sampling.eos_token_ids.begin(),
                         sampling.eos_token_ids.end());
      }
      for (int32_t id : p.stop_token_ids) {
        if (id < 0 || id >= vocab_) return absl::InvalidArgumentError("stop token outside vocab");
        suppress_.push_back(id);
      }
    }
    g.suppress_count = static_cast<int32_t>(suppress_.size()) - g.suppress_begin;
    g.num_logprobs = p.logprobs.has_value() ? *p.logprobs : -1;
    device_rows_.push_back(g);
    device_index_.push_back(static_cast<int32_t>(i));
  }

  const int64_t nd = static_cast<int64_t>(device_rows_.size());
  if (nd > 0) {
    RETURN_IF_ERROR(Reserve(nd, std::max<int64_t>(1, suppress_.size())));
    std::memcpy(rows_host_.get(), device_rows_.data(), nd * sizeof(GreedyRow));
    std::memcpy(suppress_host_.get(), suppress_.data(), suppress_.size() * 4);
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(rows_device_.get(), rows_host_.get(), nd * sizeof(GreedyRow),
                                   cudaMemcpyHostToDevice, stream_),
                   "sampling"));
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(suppress_device_.get(), suppress_host_.get(),
                                   suppress_.size() * 4, cudaMemcpyHostToDevice, stream_),
                   "sampling"));
    RETURN_IF_ERROR(
        CudaStatus(kernels::cuda::LaunchGreedySample(logits, vocab_, rows_device_.as<GreedyRow>(),
                                                     nd, suppress_device_.as<int32_t>(),
                                                     results_device_.as<GreedyResult>(), stream_),
                   "greedy sampling"));
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(results_host_.get(), results_device_.get(),
                                   nd * sizeof(GreedyResult), cudaMemcpyDeviceToHost, stream_),
                   "sampling"));
  }
  float* host_logits = host_index_.empty() ? nullptr : host_.Logits(num_logits);
  for (int64_t r = 0; r < num_logits; ++r) {
    if (!logits_row_needed_[r]) continue;
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(host_logits + r * vocab_, logits + r * vocab_,
                                   vocab_ * sizeof(float), cudaMemcpyDeviceToHost, stream_),
                   "copying logits"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "sampling"));

  out->Reset(sampling.rows.size());
  const auto* results = results_host_.as<GreedyResult>();
  for (int64_t j = 0; j < nd; ++j) {
    const GreedyResult& g = results[j];
    SampledRow& r = out->rows[device_index_[j]];
    r.first_candidate = 0;
    r.num_candidates = 0;
    if (g.status == GreedyResult::kNanOrInf) {
      r.status = absl::FailedPreconditionError("Sampler: logits contain NaN or +inf");
      continue;
    }
    if (g.status != GreedyResult::kOk) {
      r.status = absl::FailedPreconditionError("Sampler: no token has a finite logit");
      continue;
    }
    r.status = absl::OkStatus();
    r.result = SampleResult();
    r.result.token_id = g.token;
    r.result.logprob = g.logprob;
    r.result.rank = g.rank;
    r.result.num_top_logprobs = g.num_top;
    for (int k = 0; k < g.num_top; ++k) {
      r.result.top_logprobs_storage[k] = TokenLogprob{g.top_ids[k], g.top_logprobs[k]};
    }
  }
  if (host_index_.empty()) return absl::OkStatus();
  host_batch_.clear();
  for (int32_t i : host_index_) host_batch_.push_back(sampling.rows[i]);
  RETURN_IF_ERROR(
      host_.Sample(num_logits, SamplingBatch{host_batch_, sampling.eos_token_ids}, &host_out_));
  for (size_t j = 0; j < host_index_.size(); ++j) {
    SampledRow& r = out->rows[host_index_[j]];
    r = host_out_.rows[j];
    r.first_candidate = static_cast<int32_t>(out->candidates.size());
    const absl::Span<const TopCandidate> c = host_out_.CandidatesOf(host_out_.rows[j]);
    out->candidates.insert(out->candidates.end(), c.begin(), c.end());
  }
  return absl::OkStatus();
}

}  // namespace pagellm::cuda
