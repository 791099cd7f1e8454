// LoraAdapter: a LoRA fine-tune of the base model (Hu et al., 2021), served beside it: a request
// that names the adapter runs every adapted linear layer as y = W x + s * B (A x), where A is
// [rank, n_in], B is [n_out, rank] and s the adapter's scaling. Many adapters share one copy of
// the base weights and one batch (each row with its own adapter, as vLLM's multi-LoRA serving).
//
// Read from a PEFT directory (what `peft`'s save_pretrained writes and vLLM's --lora-modules
// loads): adapter_config.json and adapter_model.safetensors, tensors named
//   base_model.model.model.layers.<i>.{self_attn.{q,k,v,o}_proj,mlp.{gate,up,down}_proj}
//       .lora_{A,B}.weight
// in F32, F16 or BF16. A layer or module the adapter leaves out runs the base weights alone.
// What the loader refuses, by name (InvalidArgument unless said): a peft_type other than LORA,
// DoRA, bias training, fan_in_fan_out, modules_to_save, rank or alpha patterns, adapted
// embeddings or output heads (Unimplemented for those features); a rank above max_rank; any
// tensor it does not recognise, a shape that is not the base model's, an A without its B, a
// non-finite value. Files are hostile input: sizes are capped before they are read.
//
// Held in fp32 in the layout the kernels stream: A as [rank][n_in], B transposed as
// [rank][n_out] with the scaling folded in (kernels/cpu/lora.h). Q and K rows follow the base
// checkpoint's RoPE layout (a GGUF llama checkpoint's interleaved pairs: B's rows are permuted
// as llama.cpp permutes the base weights).
//
// Immutable once loaded; thread-safe for concurrent reads.
#ifndef PAGELLM_WORKER_MODEL_LORA_ADAPTER_H_
#define PAGELLM_WORKER_MODEL_LORA_ADAPTER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/model_config.h"
#include "worker/model/tensor_map.h"

namespace pagellm {

// The linear layers an adapter can adapt, in the order of a layer's forward pass.
enum LoraModule : int { kLoraQ, kLoraK, kLoraV, kLoraO, kLoraGate, kLoraUp, kLoraDown };
inline constexpr int kNumLoraModules = 7;

// {n_out, n_in} of module m for a model of `config` (a tensor-parallel rank's RankConfig gives
// that rank's slice).
std::pair<int64_t, int64_t> LoraModuleShape(const ModelConfig& config, LoraModule m);

// One adapted matrix; empty (no A) when the adapter leaves it alone.
struct LoraMatrix {
  int64_t n_in = 0;
  int64_t n_out = 0;
  std::vector<float> a;   // [rank][n_in]
  std::vector<float> bt;  // [rank][n_out]: scaling * B^T
  [[nodiscard]] bool empty() const { return a.empty(); }
};

struct LoraAdapter {
  std::string name;  // what requests call it (the served model name)
  std::string path;  // the directory it was read from
  // The files it was read from as the file system described them then (device, inode, size,
  // modification and change times of each): equal for two reads of unchanged files.
  std::string files;
  int64_t rank = 0;
  float scaling = 1.0f;  // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora
  std::vector<std::array<LoraMatrix, kNumLoraModules>> layers;  // one per base layer

  // Bytes of the fp32 matrices.
  [[nodiscard]] int64_t HostBytes() const;
};

// One --lora-modules entry: the name requests use and the PEFT directory.
struct LoraModuleSpec {
  std::string name;
  std::string path;
};

// Reads and checks an adapter for one model (what backend_factory.h's MakeLoraLoader makes): a
// worker's runtime LoRA updating and a tensor-parallel follower's copy of it.
using LoraLoader =
    std::function<absl::StatusOr<std::shared_ptr<const LoraAdapter>>(const LoraModuleSpec& spec)>;

// The largest rank any adapter may have (the CPU kernel's bound, kernels/cpu/lora.h).
inline constexpr int64_t kLargestLoraRank = 256;

struct LoraLoadOptions {
  int64_t max_rank = 16;  // --max-lora-rank (vLLM's default), at most kLargestLoraRank
  // Caps on what is read before it is parsed.
  int64_t max_config_bytes = 1 << 20;
  int64_t max_tensor_bytes = 4ll << 30;
};

// Reads the PEFT adapter in `dir` for a base model of `config` whose Q/K rows are in the RoPE
// layout `rope_neox` (ModelCheckpoint::rope_neox). Errors: see the header comment; NotFound for
// missing files. Messages name the file and the tensor or key.
absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadLoraAdapter(const std::string& name,
                                                             const std::string& dir,
                                                             const ModelConfig& config,
                                                             bool rope_neox,
                                                             const LoraLoadOptions& options = {});

// The part of `adapter` one tensor-parallel rank applies, as LlamaPackOptions::shard splits the
// base weights: B's output rows of Q/K/V and gate/up, A's input columns of O and down (whose
// partial products the row-parallel all-reduce sums). InvalidArgument when the world size does
// not divide a split dimension.
absl::StatusOr<std::unique_ptr<LoraAdapter>> ShardLoraAdapter(const LoraAdapter& adapter,
                                                              const ShardSpec& shard);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_LORA_ADAPTER_H_
