// CostModel: the time one engine step would take on a GPU, from a roofline of the work it does.
// It stands in for the model in the trace simulator, so every policy is charged the same way.
//
//   step = max(FLOPs / (peak FLOP/s x flops_efficiency), HBM bytes / (bandwidth x
//              bandwidth_efficiency)) + PCIe bytes / PCIe bandwidth + step_overhead_s
//
//   FLOPs  = 2 x non-embedding params x tokens                       (every layer matmul)
//          + 2 x vocab x hidden x sampled sequences                   (LM head, sampled rows only)
//          + 4 x layers x hidden x context, summed over every token  (QK^T and PV; a token at
//            position p attends to p + 1 positions, causally inside a prefill chunk)
//   HBM    = fp16 weights once per step (layers + LM head; embedding rows are a gather)
//          + per sequence: (context + tokens) x KV bytes/token read, tokens x KV bytes written
//   PCIe   = swap copies (device<->host), block bytes each; device->device copies (copy-on-write)
//            are charged 2 x block bytes of HBM traffic instead.
//
// Activations are not counted (they stay in on-chip memory/L2 for the sizes here), nor is the
// sampler. With tensor parallelism over num_gpus, FLOP/s, HBM and PCIe bandwidth scale by
// num_gpus and communication is free: an upper bound for OPT-66B/175B.
//
// Defaults: efficiencies 1.0 (a pure roofline: the simulator compares policies, and every policy
// gets the same constant factor), step_overhead_s 2 ms (the scheduler, kernel launches and
// sampling of a Python-driven engine per iteration; vLLM measures a few ms).
//
// Usage: StepCost c; model.AddSequence(&c, ...) for each scheduled sequence; AddCopies(); then
// Seconds(c). Immutable after construction; thread-safe.
#ifndef PAGELLM_TOOLS_SIMULATE_COST_MODEL_H_
#define PAGELLM_TOOLS_SIMULATE_COST_MODEL_H_

#include <cstdint>

#include "tools/simulate/hardware.h"

namespace pagellm::sim {

struct CostModelOptions {
  int num_gpus = 1;                   // tensor-parallel degree, > 0
  double flops_efficiency = 1.0;      // achieved fraction of peak FLOP/s, in (0, 1]
  double bandwidth_efficiency = 1.0;  // achieved fraction of HBM bandwidth, in (0, 1]
  double step_overhead_s = 0.002;     // fixed cost of every step that computes something
};

// The work of one step, accumulated by CostModel::Add*.
struct StepCost {
  double flops = 0;
  double hbm_bytes = 0;  // excluding weights, which Seconds() adds once
  double pcie_bytes = 0;
  int64_t tokens = 0;  // tokens computed; a step with none costs only its copies
};

class CostModel {
 public:
  CostModel(const ModelShape& model, const GpuSpec& gpu, const CostModelOptions& options);

  // Adds one sequence computing `num_tokens` tokens after `context_before` cached ones; `sample`
  // when the step produces logits for it. REQUIRES: num_tokens >= 0, context_before >= 0.
  void AddSequence(StepCost* cost, int64_t num_tokens, int64_t context_before, bool sample) const;
  // Adds KV block copies of `block_size` tokens: `pcie_blocks` swapped between host and device,
  // `device_blocks` copied within the device.
  void AddCopies(StepCost* cost, int64_t pcie_blocks, int64_t device_blocks,
                 int64_t block_size) const;
  // Wall time of the step in seconds. 0 for an empty step.
  [[nodiscard]] double Seconds(const StepCost& cost) const;

  [[nodiscard]] double weight_bytes() const { return weight_bytes_; }
  [[nodiscard]] double kv_bytes_per_token() const { return kv_bytes_per_token_; }

 private:
  double linear_flops_per_token_;    // 2 x non-embedding params
  double lm_head_flops_;             // 2 x vocab x hidden
  double attention_flops_per_pair_;  // 4 x layers x hidden, per (query, key) pair
  double weight_bytes_;              // fp16 bytes of the matrices read every step
  double kv_bytes_per_token_;
  double flops_per_s_;
  double hbm_bytes_per_s_;
  double pcie_bytes_per_s_;
  double overhead_s_;
};

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_COST_MODEL_H_
