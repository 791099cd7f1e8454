// Named GPUs and model shapes for the trace simulator: the numbers the cost model and the KV pool
// sizing need, nothing else (no weights, no kernels).
//
// GPU figures are the vendors' dense fp16 tensor-core peaks and HBM bandwidths (A100 SXM, H100
// SXM, H200 SXM). Host<->device bandwidth is an effective PCIe figure (about 80% of the link's
// theoretical rate): 25 GB/s for PCIe 4.0 x16 (A100), 50 GB/s for PCIe 5.0 x16 (H100/H200).
//
// Parameter counts cover the weight matrices (attention, MLP, embeddings, LM head, learned
// positions); biases and norms are below 0.1% and left out. Plain value types; thread-compatible.
#ifndef PAGELLM_TOOLS_SIMULATE_HARDWARE_H_
#define PAGELLM_TOOLS_SIMULATE_HARDWARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pagellm::sim {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr int64_t kFp16Bytes = 2;

struct GpuSpec {
  std::string name;
  double peak_flops = 0;      // dense fp16 FLOP/s
  double hbm_bandwidth = 0;   // bytes/s
  double memory_bytes = 0;    // device memory
  double pcie_bandwidth = 0;  // effective host<->device bytes/s (swap copies)
};

struct ModelShape {
  std::string name;
  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads without grouped-query attention
  int64_t ffn = 0;           // MLP intermediate size
  bool gated_ffn = false;    // SwiGLU (gate, up, down) instead of (fc1, fc2)
  int64_t vocab = 0;
  int64_t max_len = 0;             // context length the model serves
  bool tied_embeddings = false;    // LM head shares the input embedding matrix
  bool learned_positions = false;  // OPT: a max_len x hidden position table

  [[nodiscard]] int64_t head_dim() const { return hidden / num_heads; }
  [[nodiscard]] int64_t kv_dim() const { return num_kv_heads * head_dim(); }
  // Weights of the transformer layers (every matmul a token goes through except the LM head).
  [[nodiscard]] int64_t NonEmbeddingParams() const;
  // Every weight held in device memory.
  [[nodiscard]] int64_t TotalParams() const;
  // K and V of one token across all layers, fp16.
  [[nodiscard]] int64_t KvBytesPerToken() const { return 2 * num_layers * kv_dim() * kFp16Bytes; }
};

// Looks a name up case-insensitively ("a100-40gb", "OPT-13B"). NotFound lists the known names.
absl::StatusOr<GpuSpec> LookupGpu(const std::string& name);
absl::StatusOr<ModelShape> LookupModel(const std::string& name);
std::vector<std::string> KnownGpus();
std::vector<std::string> KnownModels();

}  // namespace pagellm::sim

#endif  // PAGELLM_TOOLS_SIMULATE_HARDWARE_H_
