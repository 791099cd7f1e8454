#include "worker/backend/cuda/device_sampler.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagellm::cuda {
namespace {

using kernels::cuda::BeamRow;
using kernels::cuda::GreedyResult;
using kernels::cuda::GreedyRow;
using kernels::cuda::PenaltyEntry;
using kernels::cuda::PenaltyRow;
using kernels::cuda::SampleRow;

bool HasPenalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
}

bool Suppressing(const SamplingRow& row) {
  return static_cast<int64_t>(row.seq.output_ids.size()) < row.seq.params->min_tokens;
}

constexpr int64_t kAlign = 16;
int64_t Aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Grows `buf` to at least `bytes` (doubling), keeping nothing.
template <typename Buffer>
absl::Status Grow(Buffer& buf, int64_t bytes, const char* what) {
  if (bytes <= buf.bytes()) return absl::OkStatus();
  ASSIGN_OR_RETURN(buf, Buffer::Allocate(std::max(bytes, 2 * buf.bytes()), what));
  return absl::OkStatus();
}

void Fill(SampledRow& r, const GreedyResult& g) {
  r.first_candidate = 0;
  r.num_candidates = 0;
  if (g.status == GreedyResult::kNanOrInf) {
    r.status = absl::FailedPreconditionError("Sampler: logits contain NaN or +inf");
    return;
  }
  if (g.status != GreedyResult::kOk) {
    r.status = absl::FailedPreconditionError("Sampler: no token has a finite logit");
    return;
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

}  // namespace

absl::Status DeviceSampler::AddSuppressed(const SamplingRow& row,
                                          const absl::Span<const int32_t> eos) {
  const SamplingParams& p = *row.seq.params;
  if (!p.ignore_eos) suppress_.insert(suppress_.end(), eos.begin(), eos.end());
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_) return absl::InvalidArgumentError("stop token outside vocab");
    suppress_.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status DeviceSampler::AddHistory(const SamplingRow& row) {
  return history_ids_.ForEach(row.seq, [&](int32_t t, int32_t c) {
    history_.push_back(PenaltyEntry{t, c});
  });
}

absl::Status DeviceSampler::Stage() {
  int64_t at = 0;
  auto section = [&](int64_t bytes) {
    const int64_t begin = at;
    at += Aligned(bytes);
    return begin;
  };
  greedy_at_ = section(greedy_rows_.size() * sizeof(GreedyRow));
  sample_at_ = section(sample_rows_.size() * sizeof(SampleRow));
  penalty_at_ = section(penalty_rows_.size() * sizeof(PenaltyRow));
  history_at_ = section(history_.size() * sizeof(PenaltyEntry));
  suppress_at_ = section(suppress_.size() * sizeof(int32_t));
  beam_at_ = section(beam_rows_.size() * sizeof(BeamRow));
  staged_bytes_ = at;
  at = 0;  // the results: sampled rows, then the beam candidates' logprobs and ids
  section((greedy_rows_.size() + sample_rows_.size()) * sizeof(GreedyResult));
  logprobs_at_ = section(num_candidates_ * sizeof(double));
  ids_at_ = section(num_candidates_ * sizeof(int32_t));
  result_bytes_ = at;
  RETURN_IF_ERROR(Grow(staging_host_, staged_bytes_, "sampling inputs"));
  RETURN_IF_ERROR(Grow(staging_device_, staged_bytes_, "sampling inputs"));
  RETURN_IF_ERROR(Grow(results_host_, result_bytes_, "sampling results"));
  RETURN_IF_ERROR(Grow(results_device_, result_bytes_, "sampling results"));
  RETURN_IF_ERROR(
      Grow(work_, static_cast<int64_t>(penalty_rows_.size()) * vocab_ * 4, "penalized logits"));
  auto* base = staging_host_.as<uint8_t>();
  std::memcpy(base + greedy_at_, greedy_rows_.data(), greedy_rows_.size() * sizeof(GreedyRow));
  std::memcpy(base + sample_at_, sample_rows_.data(), sample_rows_.size() * sizeof(SampleRow));
  std::memcpy(base + penalty_at_, penalty_rows_.data(), penalty_rows_.size() * sizeof(PenaltyRow));
  std::memcpy(base + history_at_, history_.data(), history_.size() * sizeof(PenaltyEntry));
  std::memcpy(base + suppress_at_, suppress_.data(), suppress_.size() * sizeof(int32_t));
  std::memcpy(base + beam_at_, beam_rows_.data(), beam_rows_.size() * sizeof(BeamRow));
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
  greedy_rows_.clear();
  sample_rows_.clear();
  penalty_rows_.clear();
  beam_rows_.clear();
  beam_index_.clear();
  num_candidates_ = 0;
  history_.clear();
  suppress_.clear();
  greedy_index_.clear();
  sample_index_.clear();
  host_index_.clear();
  failed_.clear();
  logits_row_needed_.assign(num_logits, 0);
  for (size_t i = 0; i < sampling.rows.size(); ++i) {
    const SamplingRow& row = sampling.rows[i];
    const SamplingParams& p = *row.seq.params;
    // Prompt logprobs, masks and logit bias: the reference sampler takes the row (copied back).
    if (row.score_token >= 0 || !row.seq.allowed_tokens.empty() || !p.logit_bias.empty()) {
      host_index_.push_back(static_cast<int32_t>(i));
      logits_row_needed_[row.logits_row] = 1;
      continue;
    }
    const auto suppress_begin = static_cast<int32_t>(suppress_.size());
    if (Suppressing(row)) RETURN_IF_ERROR(AddSuppressed(row, sampling.eos_token_ids));
    const int32_t suppress_count = static_cast<int32_t>(suppress_.size()) - suppress_begin;
    if (row.num_top_candidates > 0) {
      if (vocab_ > kernels::cuda::kMaxBeamVocab ||
          row.num_top_candidates > kernels::cuda::kMaxBeamCandidates ||
          row.num_top_candidates + suppress_count > vocab_) {
        suppress_.resize(suppress_begin);
        host_index_.push_back(static_cast<int32_t>(i));
        logits_row_needed_[row.logits_row] = 1;
        continue;
      }
      beam_rows_.push_back(BeamRow{row.logits_row, suppress_begin, suppress_count,
                                   row.num_top_candidates, static_cast<int32_t>(num_candidates_)});
      num_candidates_ += row.num_top_candidates;
      beam_index_.push_back(static_cast<int32_t>(i));
      continue;
    }
    const int num_logprobs = p.logprobs.has_value() ? *p.logprobs : -1;
    if (p.IsGreedy() && !HasPenalties(p)) {
      greedy_rows_.push_back(
          GreedyRow{row.logits_row, suppress_begin, suppress_count, num_logprobs});
      greedy_index_.push_back(static_cast<int32_t>(i));
      continue;
    }
    SampleRow s;
    s.logits_row = row.logits_row;
    if (HasPenalties(p) || suppress_count > 0) {
      const auto history_begin = static_cast<int32_t>(history_.size());
      if (HasPenalties(p)) {
        if (absl::Status st = AddHistory(row); !st.ok()) {
          history_.resize(history_begin);
          suppress_.resize(suppress_begin);
          failed_.emplace_back(static_cast<int32_t>(i), std::move(st));
          continue;
        }
      }
      s.work_row = static_cast<int32_t>(penalty_rows_.size());
      penalty_rows_.push_back(
          PenaltyRow{.logits_row = row.logits_row,
                     .work_row = s.work_row,
                     .history_begin = history_begin,
                     .history_count = static_cast<int32_t>(history_.size()) - history_begin,
                     .suppress_begin = suppress_begin,
                     .suppress_count = suppress_count,
                     .repetition = p.repetition_penalty,
                     .frequency = p.frequency_penalty,
                     .presence = p.presence_penalty});
    }
    if (!p.IsGreedy()) {
      s.temperature = p.temperature;
      s.top_k = p.top_k;
      s.top_p = p.top_p;
      s.min_p = p.min_p;
      s.u = row.seq.rng.Uniform(row.seq.output_ids.size());
    }
    s.num_logprobs = num_logprobs;
    sample_rows_.push_back(s);
    sample_index_.push_back(static_cast<int32_t>(i));
  }

  const int64_t ng = greedy_rows_.size(), ns = sample_rows_.size(), nb = beam_rows_.size();
  if (ng + ns + nb > 0) {
    RETURN_IF_ERROR(Stage());
    auto* dev = staging_device_.as<uint8_t>();
    auto* results = results_device_.as<GreedyResult>();
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(dev, staging_host_.get(), staged_bytes_, cudaMemcpyHostToDevice, stream_),
        "sampling inputs"));
    const auto* suppress = reinterpret_cast<const int32_t*>(dev + suppress_at_);
    RETURN_IF_ERROR(CudaStatus(
        kernels::cuda::LaunchGreedySample(logits, vocab_,
                                          reinterpret_cast<const GreedyRow*>(dev + greedy_at_), ng,
                                          suppress, results, stream_),
        "greedy sampling"));
    RETURN_IF_ERROR(CudaStatus(
        kernels::cuda::LaunchApplyPenalties(
            logits, vocab_, reinterpret_cast<const PenaltyRow*>(dev + penalty_at_),
            penalty_rows_.size(), reinterpret_cast<const PenaltyEntry*>(dev + history_at_),
            suppress, work_.as<float>(), stream_),
        "penalties"));
    RETURN_IF_ERROR(
        CudaStatus(kernels::cuda::LaunchSample(logits, work_.as<float>(), vocab_,
                                               reinterpret_cast<const SampleRow*>(dev + sample_at_),
                                               ns, results + ng, stream_),
                   "sampling"));
    auto* results_base = results_device_.as<uint8_t>();
    RETURN_IF_ERROR(CudaStatus(kernels::cuda::LaunchBeamCandidates(
                                   logits, vocab_, reinterpret_cast<const BeamRow*>(dev + beam_at_),
                                   nb, suppress, reinterpret_cast<int32_t*>(results_base + ids_at_),
                                   reinterpret_cast<double*>(results_base + logprobs_at_), stream_),
                               "beam candidates"));
    // Sampled rows' results, then the candidates' logprobs and ids: one copy.
    RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(results_host_.get(), results_base, result_bytes_,
                                               cudaMemcpyDeviceToHost, stream_),
                               "sampling results"));
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
  for (int64_t j = 0; j < ng; ++j) Fill(out->rows[greedy_index_[j]], results[j]);
  for (int64_t j = 0; j < ns; ++j) Fill(out->rows[sample_index_[j]], results[ng + j]);
  const auto* host_base = results_host_.as<uint8_t>();
  const auto* cand_ids = reinterpret_cast<const int32_t*>(host_base + ids_at_);
  const auto* cand_logprobs = reinterpret_cast<const double*>(host_base + logprobs_at_);
  for (int64_t j = 0; j < nb; ++j) {
    const BeamRow& b = beam_rows_[j];
    SampledRow& r = out->rows[beam_index_[j]];
    r.status = absl::OkStatus();
    r.first_candidate = static_cast<int32_t>(out->candidates.size());
    for (int32_t k = 0; k < b.num_candidates && cand_ids[b.out_begin + k] >= 0; ++k) {
      out->candidates.push_back(
          TopCandidate{cand_ids[b.out_begin + k], cand_logprobs[b.out_begin + k]});
    }
    r.num_candidates = static_cast<int32_t>(out->candidates.size()) - r.first_candidate;
  }
  for (auto& [i, status] : failed_) {
    SampledRow& r = out->rows[i];
    r.first_candidate = 0;
    r.num_candidates = 0;
    r.status = status;
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
