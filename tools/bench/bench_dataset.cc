#include "tools/bench/bench_dataset.h"

#include <algorithm>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "tools/simulate/trace.h"

namespace pagellm::bench {
namespace {

constexpr int32_t kFirstPromptTokenId = 100;
constexpr int32_t kDefaultMaxModelLen = 2048;  // sharegpt-like when the server gives none
constexpr uint64_t kTokenStream = 0x2545f4914f6cdd1dull;  // ids apart from lengths

absl::Status CheckRandomOptions(const DatasetOptions& o) {
  if (o.input_len < 1 || o.output_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--input-len (", o.input_len, ") and --output-len (", o.output_len, ") must be >= 1"));
  }
  if (!(o.range_ratio >= 0.0 && o.range_ratio < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--range-ratio must be in [0, 1), not ", o.range_ratio));
  }
  return absl::OkStatus();
}

// vLLM: [int(len * (1 - r)), int(len * (1 + r))], at least 1.
std::uniform_int_distribution<int32_t> LengthRange(int32_t len, double r) {
  const int32_t lo = std::max(1, static_cast<int32_t>(len * (1.0 - r)));
  const int32_t hi = std::max(lo, static_cast<int32_t>(len * (1.0 + r)));
  return std::uniform_int_distribution<int32_t>(lo, hi);
}

}  // namespace

absl::StatusOr<DatasetKind> ParseDatasetKind(const std::string& name) {
  if (name == "random") return DatasetKind::kRandom;
  if (name == "sharegpt-like" || name == "sharegpt_like") return DatasetKind::kShareGptLike;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --dataset '", name, "': random or sharegpt-like"));
}

absl::StatusOr<std::vector<BenchRequest>> MakeDataset(const DatasetOptions& o) {
  if (o.num_prompts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num-prompts must be >= 1, not ", o.num_prompts));
  }
  if (o.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size must be >= 1, not ", o.vocab_size));
  }
  std::vector<BenchRequest> requests(o.num_prompts);
  std::vector<int32_t> input_lens(o.num_prompts);
  if (o.kind == DatasetKind::kRandom) {
    if (absl::Status s = CheckRandomOptions(o); !s.ok()) return s;
    auto in_dist = LengthRange(o.input_len, o.range_ratio);
    auto out_dist = LengthRange(o.output_len, o.range_ratio);
    if (o.max_model_len > 0 && in_dist.max() + out_dist.max() > o.max_model_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("random dataset: input + output reaches ", in_dist.max() + out_dist.max(),
                       " tokens, more than the server's max_model_len ", o.max_model_len));
    }
    std::mt19937_64 rng(o.seed);
    for (int32_t i = 0; i < o.num_prompts; ++i) {
      input_lens[i] = in_dist(rng);
      requests[i].output_len = out_dist(rng);
    }
  } else {
    sim::TraceOptions t;
    t.num_requests = o.num_prompts;
    t.request_rate = std::numeric_limits<double>::infinity();  // arrivals are ours, not the trace's
    t.seed = o.seed;
    t.max_len = o.max_model_len > 0 ? o.max_model_len : kDefaultMaxModelLen;
    absl::StatusOr<sim::SyntheticWorkload> w = sim::LookupWorkload("sharegpt");
    if (!w.ok()) return w.status();
    absl::StatusOr<std::vector<sim::TraceRequest>> trace = sim::GenerateTrace(*w, t);
    if (!trace.ok()) return trace.status();
    for (int32_t i = 0; i < o.num_prompts; ++i) {
      input_lens[i] = static_cast<int32_t>((*trace)[i].input_len);
      requests[i].output_len = static_cast<int32_t>((*trace)[i].output_len);
    }
  }
  const int32_t first_id = o.vocab_size > kFirstPromptTokenId ? kFirstPromptTokenId : 0;
  std::uniform_int_distribution<int32_t> token(first_id, o.vocab_size - 1);
  std::mt19937_64 rng(o.seed ^ kTokenStream);
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    requests[i].prompt_token_ids.resize(input_lens[i]);
    for (int32_t& id : requests[i].prompt_token_ids) id = token(rng);
  }
  return requests;
}

}  // namespace pagellm::bench
