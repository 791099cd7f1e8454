// HfCheckpoint: a Hugging Face model directory, opened read-only.
//
// The directory holds config.json, the weights as either model.safetensors or
// model.safetensors.index.json plus the shards its "weight_map" names (model.safetensors wins
// when both exist, as in transformers), and tokenizer.json. Open() parses the config
// (hf_config.h), maps every shard and checks the index against them: shard names must be plain
// file names inside the directory (no "..", no "/", not absolute), every shard must exist and
// every tensor the index lists must be in the shard it names. Tensors present in a shard but not
// in the index are ignored, as transformers does. The tokenizer is only located here; its
// contents are read on request and parsed elsewhere.
//
// Thread-safe after construction (all methods are const).
#ifndef PAGELLM_WORKER_MODEL_HF_CHECKPOINT_H_
#define PAGELLM_WORKER_MODEL_HF_CHECKPOINT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors_file.h"

namespace pagellm {

struct HfCheckpointOptions {
  // When true a missing tokenizer.json fails Open() with NotFound.
  bool require_tokenizer = true;
  SafetensorsLimits safetensors_limits;
};

class HfCheckpoint {
 public:
  using Options = HfCheckpointOptions;

  // Opens the checkpoint in directory `dir`. Errors: NotFound for a missing directory, config,
  // weights file, shard or (when required) tokenizer.json; InvalidArgument for a malformed
  // config, index or shard, a shard name that leaves the directory, or a tensor the index lists
  // that its shard lacks; PermissionDenied / Internal for other I/O failures.
  static absl::StatusOr<std::unique_ptr<HfCheckpoint>> Open(const std::string& dir,
                                                            const Options& options = Options());

  HfCheckpoint(const HfCheckpoint&) = delete;
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

  const std::string& dir() const { return dir_; }
  // The parsed and validated config.json.
  const ModelConfig& config() const { return config_; }
  // The raw text of config.json (for fields ModelConfig does not carry, such as token ids).
  const std::string& config_json() const { return config_json_; }

  // Full path of tokenizer.json; empty when the directory has none.
  const std::string& tokenizer_json_path() const { return tokenizer_path_; }
  // Reads tokenizer.json. NotFound when the directory has none; I/O errors as for Open().
  absl::StatusOr<std::string> ReadTokenizerJson() const;

  // Number of safetensors files (1 for model.safetensors).
  size_t num_shards() const { return shards_.size(); }
  // Names of all tensors, sorted.
  std::vector<std::string> TensorNames() const;
  // The tensor called `name` (any dtype); nullptr when absent. Borrowed: valid while the
  // checkpoint lives.
  const SafetensorsTensor* Find(std::string_view name) const;
  // The tensor called `name` if it is F32, F16 or BF16; NotFound when absent, Unimplemented for
  // other dtypes.
  absl::StatusOr<const SafetensorsTensor*> GetFloatTensor(std::string_view name) const;

 private:
  HfCheckpoint() = default;
  absl::Status OpenWeights(const Options& options);

  std::string dir_;
  ModelConfig config_;
  std::string config_json_;
  std::string tokenizer_path_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  // Tensor name -> the tensor inside one of shards_.
  absl::flat_hash_map<std::string, const SafetensorsTensor*> tensors_;
};

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_HF_CHECKPOINT_H_
