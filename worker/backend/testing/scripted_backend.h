// ScriptedBackend: a Backend for tests that runs no model. It keeps a simulated paged KV pool
// that stores each token id in its slot, reads every sampled sequence's whole context back
// through its block table, and produces that row's logits by a rule of the context. So a wrong
// block table, slot, copy-on-write or swap shows up as a wrong token, as it would with a real
// model -- but engine, engine-loop and worker-service tests need no model file and can compute
// the expected tokens by hand (or with the same rule in a plain loop).
//
// The default rule puts all mass on NextToken(context): a deterministic function of every token
// and the length. Sampling goes through the CPU reference sampler. Faults are injected on
// demand (the next Forward or CopyKv fails, a row gets NaN logits) and a step hook runs at every
// Forward (tests advance an injected clock there). Every batch is checked against
// forward_batch.h's contract (ValidateForwardBatch), so a malformed batch fails the step.
// Hidden states (FinalHidden) are a rule of the context too (HiddenOf).
//
// Not thread-safe, like every Backend (the engine thread calls it); the knobs may be set only
// while no step runs (before starting an EngineLoop, or from the step hook).
#ifndef PAGELLM_WORKER_BACKEND_TESTING_SCRIPTED_BACKEND_H_
#define PAGELLM_WORKER_BACKEND_TESTING_SCRIPTED_BACKEND_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "worker/backend/adapter_slots.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu/host_sampler.h"

namespace pagellm::testing {

struct ScriptedBackendOptions {
  int64_t vocab_size = 64;
  int64_t block_size = 4;
  int64_t num_kv_blocks = 256;
  int64_t num_swap_blocks = 0;
  int64_t max_batch_tokens = 2048;
  int64_t max_model_len = 512;
  // LoRA adapter slots, empty at start; SetAdapter fills them with names (rows with an adapter
  // compute as the base model).
  int64_t adapter_slots = 0;
};

class ScriptedBackend : public Backend {
 public:
  // Fills `row` (vocab_size floats) with the logits that follow `context` (every token of the
  // sequence up to and including the one whose logits are wanted).
  using LogitsRule = std::function<void(std::span<const int32_t> context, std::span<float> row)>;

  explicit ScriptedBackend(const ScriptedBackendOptions& options = {});

  // The default rule's choice: (31 * sum of the tokens + 7 * length) % (vocab_size - 1), never
  // the last id (tests make that one EOS).
  [[nodiscard]] int32_t NextToken(std::span<const int32_t> context) const;
  // Greedy continuation of `prompt` by `n` tokens under the default rule.
  [[nodiscard]] std::vector<int32_t> Continue(std::vector<int32_t> prompt, int n) const;

  // The final hidden state (FinalHidden) of the token ending `context`: kHiddenSize floats,
  // {length, sum of the tokens, last token, 1}.
  static constexpr int64_t kHiddenSize = 4;
  [[nodiscard]] static std::vector<float> HiddenOf(std::span<const int32_t> context);

  void SetRule(LogitsRule rule) { rule_ = std::move(rule); }
  // Replaces HiddenOf as the hidden-state rule (kHiddenSize floats per context).
  using HiddenRule = std::function<std::vector<float>(std::span<const int32_t> context)>;
  void SetHiddenRule(HiddenRule rule) { hidden_rule_ = std::move(rule); }
  // The next Forward / ForwardLogits / CopyKv call fails with `status` (once).
  void FailNextForward(absl::Status status) { forward_failure_ = std::move(status); }
  void FailNextCopy(absl::Status status) { copy_failure_ = std::move(status); }
  // Runs at the start of every Forward / ForwardLogits.
  void SetStepHook(std::function<void()> hook) { step_hook_ = std::move(hook); }

  [[nodiscard]] int64_t forward_calls() const { return forward_calls_; }
  [[nodiscard]] int64_t all_decode_steps() const { return all_decode_steps_; }
  [[nodiscard]] int64_t copies() const { return copies_; }
  [[nodiscard]] int64_t max_tokens_in_a_step() const { return max_tokens_in_a_step_; }

  const ModelConfig& config() const override { return config_; }
  std::string name() const override { return "scripted"; }
  int64_t block_size() const override { return options_.block_size; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t num_kv_blocks() const override { return options_.num_kv_blocks; }
  int64_t num_swap_blocks() const override { return options_.num_swap_blocks; }
  absl::Status Forward(const ForwardBatch& batch, const SamplingBatch& sampling,
                       SamplerOutput* out) override;
  absl::Status ForwardLogits(const ForwardBatch& batch, float* logits) override;
  absl::Status CopyKv(std::span<const KvCopy> copies) override;
  absl::Status FinalHidden(std::span<const int32_t> rows, float* out) override;
  const std::vector<std::string>& adapter_names() const override { return adapters_.names(); }
  bool adapters_can_change() const override { return !adapters_.names().empty(); }
  absl::Status SetAdapter(int32_t slot, std::shared_ptr<const LoraAdapter> adapter) override;

 private:
  const ScriptedBackendOptions options_;
  ModelConfig config_;
  LogitsRule rule_;
  HiddenRule hidden_rule_ = HiddenOf;
  std::optional<absl::Status> forward_failure_;
  std::optional<absl::Status> copy_failure_;
  std::function<void()> step_hook_;
  std::vector<int32_t> device_;  // [num_kv_blocks * block_size] token id per slot, -1 unwritten
  std::vector<int32_t> swap_;    // likewise for the swap pool
  std::vector<int32_t> context_;
  std::vector<float> hidden_;  // [num_logits][kHiddenSize] of the last step
  AdapterSlots adapters_{std::vector<std::string>(), options_.adapter_slots};
  HostSampler sampler_;
  int64_t forward_calls_ = 0;
  int64_t all_decode_steps_ = 0;
  int64_t copies_ = 0;
  int64_t max_tokens_in_a_step_ = 0;
};

}  // namespace pagellm::testing

#endif  // PAGELLM_WORKER_BACKEND_TESTING_SCRIPTED_BACKEND_H_
