// StructuredOutputs: the engine's side of structured output (and of allowed_token_ids, the
// other constraint that is a token mask). It turns a request's
// StructuredOutput into a compiled grammar over the model's vocabulary (the tokenizer's tokens
// as bytes, built on first use; compiled grammars of recent requests kept, so requests with the
// same schema share states and token masks), and builds each step's allowed-token masks: the
// grammar's tokens, plus the end-of-generation and stop tokens where the output may end.
//
// Not thread-safe: the engine thread owns it.
#ifndef PAGELLM_WORKER_ENGINE_STRUCTURED_OUTPUTS_H_
#define PAGELLM_WORKER_ENGINE_STRUCTURED_OUTPUTS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/sampling/sampling_params.h"
#include "common/structured/grammar_matcher.h"
#include "common/tokenizer/tokenizer.h"

namespace pagellm {

// The grammar of `so` over bytes: a pure function, thread-safe, so callers can build it on their
// own thread. InvalidArgument ("sampling_params.structured_output: ...") when it does not
// compile. REQUIRES: so.enabled() and so.Validate() is OK.
absl::StatusOr<structured::Grammar> BuildGrammar(const StructuredOutput& so);

// BuildGrammar with a memory: the grammars of the last kKept distinct constraints it built are
// copied instead of built again (a tool-calling client sends the same tools with every request:
// 128 tools take ~5 ms to build, far less to copy). Constraints whose key exceeds kMaxKeyBytes
// are built and not kept, so what is kept stays bounded. Thread-safe: one mutex, never held
// while building.
class GrammarBuildCache {
 public:
  static constexpr int kKept = 16;
  static constexpr size_t kMaxKeyBytes = size_t{1} << 20;

  // As BuildGrammar(so).
  absl::StatusOr<structured::Grammar> Build(const StructuredOutput& so);
  // Grammars built, and copied from the kept ones, so far.
  [[nodiscard]] int64_t built() const;
  [[nodiscard]] int64_t reused() const;

 private:
  mutable std::mutex mu_;
  // Most recently used last; guarded by mu_.
  std::vector<std::pair<std::string, std::shared_ptr<const structured::Grammar>>> kept_;
  int64_t built_ = 0;   // guarded by mu_
  int64_t reused_ = 0;  // guarded by mu_
};

class StructuredOutputs {
 public:
  // Compiled grammars kept for later requests (each holds at most MatcherLimits' masks).
  static constexpr int kCachedGrammars = 16;

  // `tokenizer` is borrowed; vocab_size is the logits width (may exceed the tokenizer's).
  StructuredOutputs(const Tokenizer* tokenizer, int64_t vocab_size, std::vector<int32_t> eos_ids);

  // The compiled grammar for `so`, from `prebuilt` (BuildGrammar(so), made off the engine
  // thread) or built here when it is nullopt; a cached one when `so` was compiled recently.
  // InvalidArgument for a schema that cannot be compiled (the message says why).
  // REQUIRES: so.enabled().
  absl::StatusOr<std::shared_ptr<structured::CompiledGrammar>> Compile(
      const StructuredOutput& so, std::optional<structured::Grammar> prebuilt = std::nullopt);

  // Drops the step's masks.
  void BeginStep() { masks_.clear(); }
  // The mask of params.allowed_token_ids (mask words), made once per request.
  [[nodiscard]] std::vector<uint64_t> AllowedMask(const SamplingParams& params) const;
  // Appends the mask of the tokens `matcher` allows next under `params` (EOS unless ignore_eos,
  // and the stop token ids, where the output may end), ANDed with `allowed` (AllowedMask) when
  // it is not empty, and returns its handle.
  int64_t AddMask(structured::GrammarMatcher& matcher, const SamplingParams& params,
                  absl::Span<const uint64_t> allowed);
  // Masks computed (a vocabulary walk) and served from a grammar's cache so far, and the time
  // AddMask took in all.
  [[nodiscard]] int64_t masks_computed() const { return masks_computed_; }
  [[nodiscard]] int64_t masks_cached() const { return masks_cached_; }
  [[nodiscard]] double mask_seconds() const { return mask_seconds_; }
  // Valid until the next BeginStep.
  [[nodiscard]] absl::Span<const uint64_t> mask(int64_t handle) const {
    return absl::MakeConstSpan(masks_.data() + handle, words_);
  }

 private:
  const Tokenizer* tokenizer_;
  int64_t vocab_size_;
  int64_t words_;
  std::vector<int32_t> eos_ids_;
  std::shared_ptr<const structured::TokenVocabulary> vocab_;  // built on first use
  // Most recently used last.
  std::vector<std::pair<std::string, std::shared_ptr<structured::CompiledGrammar>>> cache_;
  std::vector<uint64_t> masks_;
  int64_t masks_computed_ = 0;
  int64_t masks_cached_ = 0;
  double mask_seconds_ = 0.0;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_ENGINE_STRUCTURED_OUTPUTS_H_
