// What the GPU backend tests share: whether a GPU is there, the small Llama / Qwen2 shapes they
// run (head_dim 64, GQA 4, a vocabulary and sizes that 2 divides), and the relative error they
// bound logits by.
#ifndef PAGELLM_WORKER_BACKEND_CUDA_TESTING_GPU_TEST_MODEL_H_
#define PAGELLM_WORKER_BACKEND_CUDA_TESTING_GPU_TEST_MODEL_H_

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "worker/model/model_config.h"
#include "worker/model/testing/tiny_model.h"

namespace pagellm::testing {

inline bool HasGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Three layers; qwen2: QKV bias and an untied LM head.
inline ModelConfig SmallGpuConfig(bool qwen2) {
  ModelConfig c = TinyLlamaConfig(3, /*attention_bias=*/qwen2, /*tied=*/!qwen2);
  c.architecture = qwen2 ? "qwen2" : "llama";
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 2048;
  return c;
}

// ||got - want|| / ||want||; infinite when got holds a NaN or an infinity.
inline double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace pagellm::testing

#endif  // PAGELLM_WORKER_BACKEND_CUDA_TESTING_GPU_TEST_MODEL_H_
