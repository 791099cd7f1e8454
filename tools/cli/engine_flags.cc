#include "tools/cli/engine_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "tools/cli/model_flags.h"

ABSL_FLAG(int64_t, block_size, 16, "KV cache block size in tokens");
ABSL_FLAG(int64_t, num_kv_blocks, 0, "KV pool size in blocks (0: from --kv-cache-memory)");
ABSL_FLAG(double, kv_cache_memory, 1.0, "KV pool budget in GiB when --num-kv-blocks is 0");
ABSL_FLAG(std::string, kv_cache_dtype, "auto", "auto | f32 | f16");
ABSL_FLAG(int64_t, max_num_seqs, 256, "most sequences per step");
ABSL_FLAG(int64_t, max_num_batched_tokens, 2048, "most tokens per step");
ABSL_FLAG(int64_t, max_model_len, 0, "context limit (0: the model's)");
ABSL_FLAG(double, swap_space, 4.0, "CPU swap space for preempted sequences, GiB");
ABSL_FLAG(std::string, preemption_mode, "auto",
          "auto (recompute single sequences, swap groups) | recompute | swap");
ABSL_FLAG(bool, enable_prefix_caching, true,
          "reuse the KV blocks of identical prompt prefixes (--no-enable-prefix-caching: off)");

namespace pagellm::cli {

CpuBackendOptions BackendOptionsFromFlags() {
  CpuBackendOptions bo;
  bo.threads = ThreadsFromFlags();
  bo.block_size = absl::GetFlag(FLAGS_block_size);
  bo.num_kv_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  bo.kv_cache_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_kv_cache_memory) * (1ll << 30));
  bo.kv_cache_dtype = absl::GetFlag(FLAGS_kv_cache_dtype);
  bo.max_batch_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  bo.swap_space_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_swap_space) * (1ll << 30));
  return bo;
}

absl::StatusOr<EngineOptions> EngineOptionsFromFlags() {
  EngineOptions eo;
  eo.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  eo.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  eo.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  absl::StatusOr<PreemptionMode> mode = ParsePreemptionMode(absl::GetFlag(FLAGS_preemption_mode));
  if (!mode.ok()) return mode.status();
  eo.preemption_mode = *mode;
  eo.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  return eo;
}

}  // namespace pagellm::cli
