// Sampler design.
//
// One call samples one logits row in a few linear passes over scratch buffers the Sampler owns:
//   1. Find the row's maximum (lowest id on ties) and any NaN; copy it into work_.
//   2. Penalties touch only tokens in the history (PenaltyHistory lists each once, with its
//      output count), so the cost is O(history), not O(vocab). min_tokens writes -inf over EOS/stop
//      ids. The maximum is patched from the touched ids, and rescanned only if the old argmax
//      changed.
//   3. Greedy returns the lowest id holding the maximum.
//   4. Otherwise p = exp((logit - max) / T), unnormalized: the maximum has exactly p = 1.
//      Candidates are either every id ("dense") or the list idx_[0, n):
//      - top-k: a k-heap scan (nth_element for large k) lists the k best ids.
//      - top-p: a token is kept iff the mass ranked above it is below top_p (vLLM's rule). A
//        vectorized pass measures the mass above a few logit levels to find a level that holds
//        the nucleus; only ids above it are listed, and those are sorted (few: the usual case)
//        or bucketed by logit into a histogram, of which only the bucket where the cumulative
//        mass crosses top_p is sorted. The vocabulary is never sorted.
//      - min-p: keep p >= min_p (relative to the maximum's p = 1).
//      One uniform draw u then walks the survivors' cumulative mass in id order (dense: by
//      512-id blocks; listed: through a bitmap of the survivors).
// Exactness: every ranking is by logit with ties to the lower id (ByLogitDesc), never by p,
// so the kept sets equal a full sort's. The O(vocab) passes live in sampler_row_ops (vectorized,
// polynomial exp); what is here is bookkeeping over candidate lists.
// Invariant between calls: kept_bits_ is all zero.
#include "worker/backend/cpu/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/backend/cpu/sampler_row_ops.h"

namespace pagellm {
namespace {

using row_ops::kBlock;
using row_ops::kKeyLevels;
using row_ops::kNumKeyLevels;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int32_t kNumBins = 4096;        // Histogram buckets for wide top-p nuclei.
constexpr int32_t kSortLimit = 1024;      // Sort nuclei candidates up to this many directly.
constexpr int32_t kHeapTopKLimit = 1024;  // Larger k uses nth_element.

// Orders token ids by logit, largest first, ties to the lower id: a strict total order
// (REQUIRES: no NaN logits).
struct ByLogitDesc {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

}  // namespace

// The largest logit and the lowest id holding it; id -1 when every value is -inf.
struct Sampler::Peak {
  float value = kNegInf;
  int32_t id = -1;
  void Offer(float v, int32_t i) {
    if (v > value || (v == value && i < id)) {
      value = v;
      id = i;
    }
  }
};

absl::StatusOr<std::unique_ptr<Sampler>> Sampler::Create(Options options) {
  if (options.vocab_size <= 0 || options.vocab_size > std::numeric_limits<int32_t>::max() - 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sampler: vocab_size must be in [1, 2^31 - 8), got ", options.vocab_size));
  }
  for (int32_t id : options.eos_token_ids) {
    if (id < 0 || id >= options.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Sampler: EOS token id ", id, " is outside the vocab of ", options.vocab_size));
    }
  }
  return std::unique_ptr<Sampler>(new Sampler(std::move(options)));
}

Sampler::Sampler(Options options)
    : vocab_size_(options.vocab_size),
      eos_token_ids_(std::move(options.eos_token_ids)),
      work_(vocab_size_),
      probs_(vocab_size_),
      block_sums_((vocab_size_ + kBlock - 1) / kBlock),
      bins_(kNumBins),
      idx_(vocab_size_),
      boundary_(vocab_size_),
      history_(vocab_size_),
      kept_bits_((vocab_size_ + 63) / 64, 0) {}

Sampler::~Sampler() = default;

std::vector<int32_t> Sampler::TEST_kept_ids() const {
  std::vector<int32_t> ids;
  if (last_num_kept_ >= 0) {
    ids.assign(idx_.begin(), idx_.begin() + last_num_kept_);
  } else {
    for (int32_t i = 0; i < vocab_size_; ++i) {
      if (probs_[i] > 0.0f) ids.push_back(i);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<SampleResult> Sampler::Sample(absl::Span<const float> logits,
                                             const SequenceToSample& seq) {
  if (static_cast<int64_t>(logits.size()) != vocab_size_) {
    return absl::InvalidArgumentError(absl::StrCat("Sampler: logits row has ", logits.size(),
                                                   " entries, vocab_size is ", vocab_size_));
  }
  const SamplingParams& params = *seq.params;

  // 1. Raw peak; reject NaN/+inf; copy.
  const row_ops::RowPeak raw = row_ops::ScanPeak(logits.data(), vocab_size_);
  if (raw.has_nan || raw.value == std::numeric_limits<float>::infinity()) {
    return absl::FailedPreconditionError("Sampler: logits contain NaN or +inf");
  }
  std::copy(logits.begin(), logits.end(), work_.begin());

  // 2. Logit bias, penalties, the allowed tokens and min_tokens; keep the peak current.
  Peak peak{raw.value, raw.id};
  bool peak_changed = false;
  if (!params.logit_bias.empty()) {
    for (const auto& [id, bias] : params.logit_bias) {
      if (id < 0 || id >= vocab_size_) {
        return absl::InvalidArgumentError(absl::StrCat("Sampler: logit_bias id ", id));
      }
      work_[id] += bias;
    }
    const row_ops::RowPeak biased = row_ops::ScanPeak(work_.data(), vocab_size_);
    peak = Peak{biased.value, biased.id};
  }
  RETURN_IF_ERROR(ApplyPenalties(seq, peak, peak_changed));
  if (!seq.allowed_tokens.empty()) {
    if (static_cast<int64_t>(seq.allowed_tokens.size()) != (vocab_size_ + 63) / 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sampler: an allowed-tokens mask of ", seq.allowed_tokens.size(), " words"));
    }
    // Whole words first (a grammar allows few tokens or nearly all): no per-bit work there.
    for (int64_t w = 0; w < static_cast<int64_t>(seq.allowed_tokens.size()); ++w) {
      const int64_t base = w * 64;
      const int64_t width = std::min<int64_t>(64, vocab_size_ - base);
      uint64_t banned = ~seq.allowed_tokens[w];
      if (width < 64) banned &= (uint64_t{1} << width) - 1;
      if (banned == 0) continue;
      if (banned == ~uint64_t{0}) {
        std::fill_n(work_.begin() + base, 64, kNegInf);
        continue;
      }
      for (; banned != 0; banned &= banned - 1) work_[base + __builtin_ctzll(banned)] = kNegInf;
    }
    peak_changed |= !((seq.allowed_tokens[peak.id >> 6] >> (peak.id & 63)) & 1);
  }
  if (static_cast<int64_t>(seq.output_ids.size()) < params.min_tokens) {
    peak_changed |= SuppressStopTokens(params, peak.id);
  }
  if (peak_changed) {
    const row_ops::RowPeak rescan = row_ops::ScanPeak(work_.data(), vocab_size_);
    peak = Peak{rescan.value, rescan.id};
  }
  if (peak.id < 0 || !std::isfinite(peak.value)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Sampler: no token has a finite logit after penalties (max ", peak.value, ")"));
  }

  // 3./4. Choose.
  SampleResult result;
  if (params.IsGreedy()) {
    result.token_id = peak.id;
  } else {
    const double u = seq.rng.Uniform(seq.output_ids.size());
    result.token_id = SampleFromWork(params, peak.value, u);
  }
  if (params.logprobs.has_value()) {
    FillLogprobs(logits, raw.value, *params.logprobs, result);
  }
  return result;
}

absl::StatusOr<SampleResult> Sampler::Score(absl::Span<const float> logits, int32_t token,
                                            int num_top) {
  if (static_cast<int64_t>(logits.size()) != vocab_size_ || token < 0 || token >= vocab_size_ ||
      num_top < 0 || num_top > kMaxLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("Sampler: scoring token ", token, " with ",
                                                   num_top, " top logprobs over ", logits.size(),
                                                   " logits (vocab_size ", vocab_size_, ")"));
  }
  const row_ops::RowPeak raw = row_ops::ScanPeak(logits.data(), vocab_size_);
  if (raw.has_nan || raw.value == std::numeric_limits<float>::infinity()) {
    return absl::FailedPreconditionError("Sampler: logits contain NaN or +inf");
  }
  SampleResult result;
  result.token_id = token;
  FillLogprobs(logits, raw.value, num_top, result);
  return result;
}

absl::Status Sampler::SampleBatch(absl::Span<const float> logits, const SamplingBatch& batch,
                                  SamplerOutput* out) {
  const int64_t num_logits = static_cast<int64_t>(logits.size()) / vocab_size_;
  if (static_cast<int64_t>(logits.size()) != num_logits * vocab_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sampler: ", logits.size(), " logits are not whole rows of ", vocab_size_));
  }
  if (!std::equal(batch.eos_token_ids.begin(), batch.eos_token_ids.end(), eos_token_ids_.begin(),
                  eos_token_ids_.end())) {
    return absl::InvalidArgumentError("Sampler: the batch's EOS ids are not the sampler's");
  }
  for (const SamplingRow& row : batch.rows) {
    if (row.logits_row < 0 || row.logits_row >= num_logits || row.num_top_candidates < 0 ||
        row.num_top_candidates > vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Sampler: a row reads logits row ", row.logits_row, " of ", num_logits, " and wants ",
          row.num_top_candidates, " candidates (vocab_size ", vocab_size_, ")"));
    }
    if (row.score_token >= 0 && (row.score_token >= vocab_size_ || row.num_top_candidates > 0 ||
                                 !row.seq.params->prompt_logprobs.has_value())) {
      return absl::InvalidArgumentError(absl::StrCat("Sampler: a scoring row for token ",
                                                     row.score_token, " (vocab_size ", vocab_size_,
                                                     ") is not a prompt-logprobs row"));
    }
  }
  out->Reset(batch.rows.size());
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const SamplingRow& row = batch.rows[i];
    SampledRow& r = out->rows[i];
    const absl::Span<const float> row_logits =
        logits.subspan(row.logits_row * vocab_size_, vocab_size_);
    r.first_candidate = static_cast<int32_t>(out->candidates.size());
    r.num_candidates = 0;
    if (row.num_top_candidates > 0) {
      const SamplingParams& p = *row.seq.params;
      banned_.clear();
      if (static_cast<int64_t>(row.seq.output_ids.size()) < p.min_tokens) {
        if (!p.ignore_eos) banned_.assign(eos_token_ids_.begin(), eos_token_ids_.end());
        banned_.insert(banned_.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
      }
      AppendTopCandidates(row_logits, row.num_top_candidates, banned_, &out->candidates);
      r.num_candidates = static_cast<int32_t>(out->candidates.size()) - r.first_candidate;
      r.status = absl::OkStatus();
      continue;
    }
    absl::StatusOr<SampleResult> result =
        row.score_token >= 0 ? Score(row_logits, row.score_token, *row.seq.params->prompt_logprobs)
                             : Sample(row_logits, row.seq);
    if (result.ok()) {
      r.status = absl::OkStatus();
      r.result = *result;
    } else {
      r.status = result.status();
    }
  }
  return absl::OkStatus();
}

void Sampler::AppendTopCandidates(absl::Span<const float> logits, int32_t count,
                                  absl::Span<const int32_t> banned,
                                  std::vector<TopCandidate>* out) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = max_logit + std::log(sum);

  // Partial selection of the `count` largest logits (ties to the lower id): a heap at the end of
  // `out` whose front is the worst kept candidate. `logprob` holds the raw logit until the end.
  auto better = [](const TopCandidate& a, const TopCandidate& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token_id < b.token_id);
  };
  const size_t base = out->size();
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (!banned.empty() && std::find(banned.begin(), banned.end(), id) != banned.end()) continue;
    const TopCandidate c{id, static_cast<double>(logits[id])};
    const size_t have = out->size() - base;
    if (have == static_cast<size_t>(count) && !better(c, (*out)[base])) continue;
    if (have == static_cast<size_t>(count)) {
      std::pop_heap(out->begin() + base, out->end(), better);
      out->back() = c;
    } else {
      out->push_back(c);
    }
    std::push_heap(out->begin() + base, out->end(), better);
  }
  std::sort(out->begin() + base, out->end(), better);
  for (size_t i = base; i < out->size(); ++i) (*out)[i].logprob -= log_z;
}

absl::Status Sampler::ApplyPenalties(const SequenceToSample& seq, Peak& peak, bool& peak_changed) {
  const SamplingParams& p = *seq.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  if (!repetition && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) {
    return absl::OkStatus();
  }
  Peak touched_peak;
  RETURN_IF_ERROR(history_.ForEach(seq, [&](int32_t t, int32_t c) {
    float v = work_[t];
    if (repetition) v = v > 0.0f ? v / p.repetition_penalty : v * p.repetition_penalty;
    v -= p.frequency_penalty * static_cast<float>(c);
    if (c > 0) v -= p.presence_penalty;
    work_[t] = v;
    peak_changed |= t == peak.id;
    touched_peak.Offer(v, t);
  }));
  if (touched_peak.id >= 0) peak.Offer(touched_peak.value, touched_peak.id);
  return absl::OkStatus();
}

bool Sampler::SuppressStopTokens(const SamplingParams& params, int32_t peak_id) {
  bool hit_peak = false;
  auto suppress = [&](int32_t id) {
    work_[id] = kNegInf;
    hit_peak |= id == peak_id;
  };
  if (!params.ignore_eos) {
    for (int32_t id : eos_token_ids_) suppress(id);
  }
  for (int32_t id : params.stop_token_ids) suppress(id);
  return hit_peak;
}

int32_t Sampler::SampleFromWork(const SamplingParams& params, float max_logit, double u) {
  const float inv_t = 1.0f / params.temperature;
  const float* w = work_.data();
  float* probs = probs_.data();
  int32_t* idx = idx_.data();
  const auto vocab = static_cast<int32_t>(vocab_size_);
  const bool top_p = params.top_p < 1.0f;

  // Candidates: the list idx[0, n) when `list`, else every id.
  bool list = false;
  int32_t n = vocab;
  double total = 0.0;  // The candidates' mass.
  double level_mass[kNumKeyLevels];
  if (params.top_k > 0 && params.top_k < vocab) {
    n = SelectTopK(params.top_k);
    list = true;
    for (int32_t j = 0; j < n; ++j) {
      total += probs[idx[j]] = row_ops::ExpNonPositive((w[idx[j]] - max_logit) * inv_t);
    }
  } else {
    row_ops::ExpBlocks(w, vocab, max_logit, inv_t, probs, block_sums_.data(),
                       top_p ? level_mass : nullptr);
    total = std::accumulate(block_sums_.begin(), block_sums_.end(), 0.0);
  }

  if (top_p) {
    const double target = static_cast<double>(params.top_p) * total;
    float level = std::numeric_limits<float>::infinity();  // All candidates' keys are below.
    if (!list) {
      // The lowest level whose mass above reaches the target bounds the nucleus (the margin
      // covers summation-order rounding); only ids above it become candidates.
      for (int l = 0; l < kNumKeyLevels; ++l) {
        if (level_mass[l] >= target * (1.0 + 1e-6)) {
          level = kKeyLevels[l];
          break;
        }
      }
      n = row_ops::CollectBelowKey(w, vocab, max_logit, inv_t, level, idx);
      list = true;
    }
    n = ApplyTopP(n, max_logit, inv_t, level, target, total);
  }

  // min-p: the peak's p is exactly 1, so the threshold is min_p itself.
  if (params.min_p > 0.0f) {
    if (list) {
      int32_t kept = 0;
      total = 0.0;
      for (int32_t j = 0; j < n; ++j) {
        const float p = probs[idx[j]];
        if (p >= params.min_p) {
          idx[kept++] = idx[j];
          total += p;
        }
      }
      n = kept;
    } else {
      row_ops::ZeroBelow(probs, vocab, params.min_p, block_sums_.data());
      total = std::accumulate(block_sums_.begin(), block_sums_.end(), 0.0);
    }
  }

  last_num_kept_ = list ? n : -1;

  // One draw over the survivors' cumulative mass, walked in id order (the order the GPU sampler
  // walks too, so that both choose the same token for the same u). The peak (p = 1) always
  // survives, so total >= 1; rounding can leave r just past the end, which falls back to the
  // last survivor.
  const double r = u * total;
  double cumulative = 0.0;
  if (list) return DrawListed(n, r);
  int32_t first = 0;  // Skip whole blocks, then walk ids.
  for (size_t b = 0; b + 1 < block_sums_.size(); ++b) {
    if (r < cumulative + block_sums_[b]) break;
    cumulative += block_sums_[b];
    first += kBlock;
  }
  int32_t last = -1;
  for (int32_t id = first; id < vocab; ++id) {
    if (probs[id] <= 0.0f) continue;
    cumulative += probs[id];
    last = id;
    if (r < cumulative) return id;
  }
  if (last < 0) {  // r fell past the last positive id of the final block: scan back for it.
    for (int32_t id = vocab - 1; id >= 0 && last < 0; --id) {
      if (probs[id] > 0.0f) last = id;
    }
  }
  return last;
}

int32_t Sampler::DrawListed(int32_t n, double r) {
  const int32_t* idx = idx_.data();
  const float* probs = probs_.data();
  uint64_t* bits = kept_bits_.data();
  int32_t lo = std::numeric_limits<int32_t>::max(), hi = -1;
  for (int32_t j = 0; j < n; ++j) {
    const int32_t id = idx[j];
    if (probs[id] <= 0.0f) continue;
    bits[id >> 6] |= uint64_t{1} << (id & 63);
    lo = std::min(lo, id);
    hi = std::max(hi, id);
  }
  int32_t chosen = -1, last = -1;
  double cumulative = 0.0;
  for (int32_t w = lo >> 6; hi >= 0 && w <= (hi >> 6) && chosen < 0; ++w) {
    for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
      const int32_t id = (w << 6) + std::countr_zero(word);
      cumulative += probs[id];
      last = id;
      if (r < cumulative) {
        chosen = id;
        break;
      }
    }
  }
  for (int32_t j = 0; j < n; ++j) bits[idx[j] >> 6] = 0;  // the invariant: all zero between calls
  return chosen >= 0 ? chosen : last;
}

int32_t Sampler::SelectTopK(int32_t k) {
  int32_t* idx = idx_.data();
  const float* w = work_.data();
  const ByLogitDesc order{w};
  const auto vocab = static_cast<int32_t>(vocab_size_);
  if (k > kHeapTopKLimit) {
    std::iota(idx, idx + vocab, 0);
    std::nth_element(idx, idx + k, idx + vocab, order);
    return k;
  }
  // Heap of the best k so far; its front is the worst of them. Later ids lose ties.
  std::iota(idx, idx + k, 0);
  std::make_heap(idx, idx + k, order);
  float worst = w[idx[0]];
  for (int64_t i = row_ops::FindNextAbove(w, k, vocab, worst); i < vocab;
       i = row_ops::FindNextAbove(w, i + 1, vocab, worst)) {
    std::pop_heap(idx, idx + k, order);
    idx[k - 1] = static_cast<int32_t>(i);
    std::push_heap(idx, idx + k, order);
    worst = w[idx[0]];
  }
  return k;
}

int32_t Sampler::ApplyTopP(int32_t n, float max_logit, float inv_t, float max_key, double target,
                           double& kept_mass) {
  int32_t* idx = idx_.data();
  const float* w = work_.data();
  const float* probs = probs_.data();
  const ByLogitDesc order{w};
  // Keeps the sorted ids[0, count) while the mass ranked above stays below target, appending
  // them to idx[kept...]; returns the new kept count. Safe in place (ids == idx + kept).
  double above = 0.0;
  auto walk = [&](const int32_t* ids, int32_t count, int32_t kept) {
    for (int32_t j = 0; j < count && above < target; ++j) {
      above += probs[ids[j]];
      idx[kept++] = ids[j];
    }
    kept_mass = above;
    return kept;
  };
  if (n <= kSortLimit) {
    std::sort(idx, idx + n, order);
    return walk(idx, n, 0);
  }

  // Histogram of mass by key = (max - logit) / T over [0, range). Bucket order follows logit
  // order (every step is monotone), so the nucleus is: all buckets before the one where the
  // cumulative mass reaches target, plus a prefix of that bucket in sorted order.
  float range = max_key;
  if (!std::isfinite(range)) {
    range = 0.0f;
    for (int32_t j = 0; j < n; ++j) {
      const float key = (max_logit - w[idx[j]]) * inv_t;
      if (std::isfinite(key)) range = std::max(range, key);
    }
  }
  range = std::min(range, 64.0f);
  const float scale = range > 0.0f ? kNumBins / range : 0.0f;
  // boundary_[j] first holds candidate j's bucket.
  int32_t* bucket = boundary_.data();
  std::fill(bins_.begin(), bins_.end(), 0.0);
  for (int32_t j = 0; j < n; ++j) {
    const float key = (max_logit - w[idx[j]]) * inv_t;
    bucket[j] =
        key < range ? std::min(kNumBins - 1, static_cast<int32_t>(key * scale)) : kNumBins - 1;
    bins_[bucket[j]] += probs[idx[j]];
  }
  int32_t crossing = 0;
  for (; crossing < kNumBins - 1; ++crossing) {
    if (above + bins_[crossing] >= target) break;
    above += bins_[crossing];
  }
  // Partition: buckets before the crossing stay in idx (kept <= j); the crossing bucket's ids
  // go to boundary_ (num_boundary <= j, so bucket[j] is read before it can be overwritten).
  int32_t kept = 0, num_boundary = 0;
  for (int32_t j = 0; j < n; ++j) {
    const int32_t b = bucket[j];
    if (b < crossing) {
      idx[kept++] = idx[j];
    } else if (b == crossing) {
      boundary_[num_boundary++] = idx[j];
    }
  }
  std::sort(boundary_.data(), boundary_.data() + num_boundary, order);
  return walk(boundary_.data(), num_boundary, kept);
}

void Sampler::FillLogprobs(absl::Span<const float> logits, float raw_max, int num_top,
                           SampleResult& result) {
  const float* l = logits.data();
  // probs_/block_sums_ are free once the token is chosen.
  row_ops::ExpBlocks(l, vocab_size_, raw_max, 1.0f, probs_.data(), block_sums_.data(), nullptr);
  const double sum = std::accumulate(block_sums_.begin(), block_sums_.end(), 0.0);
  const double log_z = static_cast<double>(raw_max) + std::log(sum);

  const float chosen = l[result.token_id];
  result.logprob = static_cast<float>(chosen - log_z);
  result.rank = row_ops::CountGreater(l, vocab_size_, chosen) + 1;

  // Top num_top by a scan that keeps a small sorted array; ids arrive in increasing order, so a
  // later equal logit never displaces an earlier one (ties: lower id first).
  TokenLogprob* top = result.top_logprobs_storage.data();
  int count = 0;
  for (int64_t i = 0; i < vocab_size_ && num_top > 0;) {
    const float v = l[i];
    int pos = count < num_top ? count++ : count - 1;
    while (pos > 0 && v > top[pos - 1].logprob) {
      top[pos] = top[pos - 1];
      --pos;
    }
    top[pos] = TokenLogprob{static_cast<int32_t>(i), v};  // Raw logit for now.
    // Once full, only a strictly larger logit can enter.
    i = count < num_top ? i + 1
                        : row_ops::FindNextAbove(l, i + 1, vocab_size_, top[count - 1].logprob);
  }
  for (int j = 0; j < count; ++j) {
    top[j].logprob = static_cast<float>(top[j].logprob - log_z);
  }
  result.num_top_logprobs = count;
}

}  // namespace pagellm
