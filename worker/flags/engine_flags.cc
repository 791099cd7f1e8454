#include "worker/flags/engine_flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/flags/lora_modules.h"
#include "worker/flags/model_flags.h"
#include "worker/flags/speculative_config.h"

ABSL_FLAG(std::string, device, "cpu", "cpu | cuda");
ABSL_FLAG(int32_t, gpu_id, 0, "--device cuda: the GPU to use");
ABSL_FLAG(double, gpu_memory_utilization, 0.9,
          "--device cuda: fraction of GPU memory for weights, activations and the KV cache (the "
          "KV pool gets what is left after loading and one profiled step)");
ABSL_FLAG(bool, enforce_eager, false, "--device cuda: no CUDA graphs for decode steps");
ABSL_FLAG(std::string, dtype, "auto",
          "weight type: auto | float32 | bfloat16 (--device cpu: F32/F16/BF16 matrices rounded to "
          "bf16 at load; quantized ones stay) | float16 (--device cuda); the KV cache's is "
          "--kv-cache-dtype");
ABSL_FLAG(int64_t, block_size, 16, "KV cache block size in tokens");
ABSL_FLAG(int64_t, num_kv_blocks, 0,
          "KV pool size in blocks (0: from --kv-cache-memory, or on a GPU from "
          "--gpu-memory-utilization)");
ABSL_FLAG(double, kv_cache_memory, 1.0, "KV pool budget in GiB when --num-kv-blocks is 0");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "auto | f32 | f16 | fp8 | fp8_e4m3 | fp8_e5m2 (fp8: CPU only, half the bytes of f16)");
ABSL_FLAG(int64_t, max_num_seqs, 256, "most sequences per step");
ABSL_FLAG(int64_t, max_num_batched_tokens, 0,
          "most tokens per step (0: 256 on --device cpu, 2048 otherwise). A step's latency grows "
          "with it, and every running stream waits for the step: on a CPU a 2048-token prompt "
          "chunk takes seconds");
ABSL_FLAG(int64_t, long_prefill_token_threshold, -1,
          "while other requests run or wait, one prompt chunk takes at most this many tokens of "
          "a step (-1: half of --max-num-batched-tokens; 0: no cap)");
ABSL_FLAG(int64_t, max_model_len, 0,
          "context limit (0: the model's, lowered to what the KV pool holds for one sequence; "
          "a value above either is refused at start)");
ABSL_FLAG(double, swap_space, 4.0, "swap pool for preempted sequences, GiB of host memory");
ABSL_FLAG(std::string, preemption_mode, "auto",
          "auto (recompute single sequences, swap groups) | recompute | swap");
ABSL_FLAG(std::string, scheduling_policy, "fcfs",
          "fcfs, or priority: requests with a smaller `priority` are scheduled first and "
          "preempted last (ties by arrival)");
ABSL_FLAG(bool, enable_prefix_caching, true,
          "reuse the KV blocks of identical prompt prefixes (--no-enable-prefix-caching: off)");
ABSL_FLAG(std::string, speculative_config, "",
          "speculative decoding as vLLM spells it, e.g. '{\"method\": \"ngram\", "
          "\"num_speculative_tokens\": 5, \"prompt_lookup_max\": 4}' (n-gram prompt lookup; "
          "a request's tokens are the same with it or without)");
ABSL_FLAG(bool, enable_lora, false,
          "accepted for vLLM's command lines: --lora-modules alone serves adapters");
ABSL_FLAG(std::vector<std::string>, lora_modules, {},
          "LoRA adapters (PEFT directories) served beside the model, NAME=PATH,...: a request "
          "naming NAME as its model runs the adapter");
ABSL_FLAG(int64_t, max_lora_rank, 16, "largest LoRA rank --lora-modules may load (1..256)");
ABSL_FLAG(int64_t, max_loras, 8,
          "with --allow-runtime-lora-updating: the backend's LoRA adapter slots (1..64), what one "
          "batch can mix: the --lora-modules ones and those loaded while serving");
ABSL_FLAG(int64_t, max_cpu_loras, 0,
          "with --allow-runtime-lora-updating: LoRA adapters a worker holds in host memory, "
          "--max-loras..1024 (0: --max-loras); those loaded while serving move into the slots "
          "as requests need them, and beyond this many (up to 4096 served) the least recently "
          "used one lets go of its weights until a request needs them again");
ABSL_FLAG(bool, allow_runtime_lora_updating, false,
          "pagellm-worker: serve LoadLoraAdapter/UnloadLoraAdapter (the router's "
          "/v1/load_lora_adapter and /v1/unload_lora_adapter, vLLM's "
          "VLLM_ALLOW_RUNTIME_LORA_UPDATING); needs --lora-dir");
ABSL_FLAG(int64_t, mock_step_delay_us, 0,
          "--load-format mock: sleep this long per engine step to imitate compute");

namespace pagellm::cli {
namespace {

// Adapters a worker may hold in host memory (--max-cpu-loras).
constexpr int64_t kMaxCpuLoras = 1024;

std::string DeviceFromFlags() {
  return IsMockModelFromFlags() ? "mock" : absl::GetFlag(FLAGS_device);
}

}  // namespace

int64_t MaxNumBatchedTokensFromFlags(const std::string& device) {
  const int64_t flag = absl::GetFlag(FLAGS_max_num_batched_tokens);
  if (flag > 0) return flag;
  return device == "cpu" ? 256 : 2048;
}

absl::StatusOr<BackendOptions> BackendOptionsFromFlags() {
  BackendOptions o;
  o.device = DeviceFromFlags();
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  const int64_t swap_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_swap_space) * (1ll << 30));

  CpuBackendOptions& c = o.cpu;
  c.threads = ThreadsFromFlags();
  c.block_size = absl::GetFlag(FLAGS_block_size);
  c.num_kv_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  c.kv_cache_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_kv_cache_memory) * (1ll << 30));
  c.kv_cache_dtype = absl::GetFlag(FLAGS_kv_cache_dtype);
  c.max_batch_tokens = MaxNumBatchedTokensFromFlags(o.device);
  c.swap_space_bytes = swap_bytes;

  CudaBackendOptions& g = o.cuda;
  g.dtype = dtype;
  g.block_size = c.block_size;
  g.num_kv_blocks = c.num_kv_blocks;
  g.swap_space_bytes = swap_bytes;
  g.max_batch_tokens = c.max_batch_tokens;
  g.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  g.device_id = absl::GetFlag(FLAGS_gpu_id);
  g.gpu_memory_utilization = absl::GetFlag(FLAGS_gpu_memory_utilization);
  g.enforce_eager = absl::GetFlag(FLAGS_enforce_eager);

  MockBackendOptions& m = o.mock;
  m.block_size = c.block_size;
  if (c.num_kv_blocks > 0) m.num_kv_blocks = c.num_kv_blocks;
  m.max_batch_tokens = c.max_batch_tokens;
  m.step_delay_us = absl::GetFlag(FLAGS_mock_step_delay_us);

  ASSIGN_OR_RETURN(o.lora_modules, ParseLoraModules(absl::GetFlag(FLAGS_lora_modules)));
  o.max_lora_rank = absl::GetFlag(FLAGS_max_lora_rank);
  const int64_t max_loras = absl::GetFlag(FLAGS_max_loras);
  if (max_loras < 1 || max_loras > kMaxLoraModules) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-loras ", max_loras, " is not in 1..", kMaxLoraModules));
  }
  // Slots beyond --lora-modules only when adapters may come while serving: on a GPU each slot
  // costs kernels in every step.
  o.max_loras = AllowRuntimeLoraUpdatingFromFlags() ? max_loras : 0;
  if (o.max_lora_rank < 1 || o.max_lora_rank > kLargestLoraRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-lora-rank ", o.max_lora_rank, " is not in 1..", kLargestLoraRank));
  }

  c.dtype = dtype;
  if (o.device == "cuda" && absl::StartsWith(c.kv_cache_dtype, "fp8")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-cache-dtype ", c.kv_cache_dtype,
                     ": the CUDA backend's KV cache has the weights' type (bfloat16 or float16); "
                     "fp8 caches are the CPU backend's"));
  }
  if (o.device == "cpu" && dtype != "auto" && dtype != "float32" && dtype != "bfloat16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype ", dtype,
        ": the CPU backend takes auto, float32 or bfloat16; float16 is for --device cuda. The KV "
        "cache's type is --kv-cache-dtype."));
  }
  return o;
}

bool AllowRuntimeLoraUpdatingFromFlags() {
  return absl::GetFlag(FLAGS_allow_runtime_lora_updating);
}

absl::StatusOr<EngineOptions> EngineOptionsFromFlags() {
  EngineOptions eo;
  eo.max_num_batched_tokens = MaxNumBatchedTokensFromFlags(DeviceFromFlags());
  const int64_t threshold = absl::GetFlag(FLAGS_long_prefill_token_threshold);
  eo.long_prefill_token_threshold =
      threshold >= 0 ? threshold : std::max<int64_t>(1, eo.max_num_batched_tokens / 2);
  eo.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  eo.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  absl::StatusOr<PreemptionMode> mode = ParsePreemptionMode(absl::GetFlag(FLAGS_preemption_mode));
  if (!mode.ok()) return mode.status();
  eo.preemption_mode = *mode;
  ASSIGN_OR_RETURN(eo.scheduling_policy,
                   ParseSchedulingPolicy(absl::GetFlag(FLAGS_scheduling_policy)));
  eo.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  const int64_t max_loras = absl::GetFlag(FLAGS_max_loras);
  const int64_t max_cpu_loras = absl::GetFlag(FLAGS_max_cpu_loras);
  if (max_cpu_loras != 0 && (max_cpu_loras < max_loras || max_cpu_loras > kMaxCpuLoras)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-cpu-loras ", max_cpu_loras,
                                                   " is not in --max-loras (", max_loras, ")..",
                                                   kMaxCpuLoras));
  }
  eo.max_cpu_loras = AllowRuntimeLoraUpdatingFromFlags() ? max_cpu_loras : 0;
  ASSIGN_OR_RETURN(eo.speculative, ParseSpeculativeConfig(absl::GetFlag(FLAGS_speculative_config)));
  return eo;
}

}  // namespace pagellm::cli
