// LoadModel: opens a model in any supported form and returns its checkpoint (the tensors as the
// file holds them, for a backend to pack or upload) and its tokenizer.
//
//   format "auto":  a directory is a Hugging Face checkpoint, a file is GGUF.
//   format "gguf" / "hf": as named.
//   format "dummy": random weights of the shape `dummy_preset` (see DummyModelPreset) in
//                   `dummy_type`; the tokenizer comes from `tokenizer_path` (GGUF or
//                   tokenizer.json), or from `path` when it names a GGUF file.
// ("mock", a model-free byte tokenizer, is not a file format: see worker/backend/mock.)
//
// Errors: NotFound / InvalidArgument / Unimplemented with the file and the reason.
#ifndef PAGELLM_WORKER_MODEL_MODEL_LOADER_H_
#define PAGELLM_WORKER_MODEL_MODEL_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/tokenizer/special_tokens.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/model/model_checkpoint.h"

namespace pagellm {

struct LoadModelOptions {
  std::string path;
  std::string format = "auto";  // auto | gguf | hf | dummy
  std::string tokenizer_path;   // optional override
  std::string dummy_preset = "smollm2-135m";
  std::string dummy_type = "q4_1";  // q4_0 | q4_1 | q8_0 | f16 | bf16 | f32
  uint64_t dummy_seed = 0;
  // Dummy weights as shapes only (ModelCheckpoint::generated), for a backend that makes them
  // itself: dummy_type must be f16 or bf16.
  bool dummy_generated_by_backend = false;
  // pagellm-worker --generation-config DIR: where the end-of-generation ids besides the
  // tokenizer's EOS come from (DIR's generation_config.json, else its config.json, else none),
  // as vLLM reads them. "": the checkpoint's own files (none for a GGUF file).
  std::string generation_config_dir;
};

struct LoadedModel {
  std::shared_ptr<const ModelCheckpoint> checkpoint;
  std::unique_ptr<Tokenizer> tokenizer;
  // Jinja2 chat template: GGUF tokenizer.chat_template, or next to an HF checkpoint or
  // tokenizer.json chat_template.jinja, else tokenizer_config.json's chat_template (as
  // transformers loads it). Empty when the model has none.
  std::string chat_template;
  // The special tokens the template sees: tokenizer_config.json's (else
  // special_tokens_map.json's) next to a tokenizer.json; a GGUF file's special token ids' texts.
  SpecialTokenTexts chat_tokens;
  // A Hugging Face checkpoint's generation_config.json (the model's default sampling parameters,
  // common/api/sampling_defaults.h); nullopt for GGUF files, dummy models and checkpoints
  // without one.
  std::optional<std::string> generation_config;
};

absl::StatusOr<LoadedModel> LoadModel(const LoadModelOptions& options);

// generation_config.json holds a few hundred bytes.
inline constexpr uintmax_t kMaxGenerationConfigFileBytes = 1 << 20;

// The text of `dir`/generation_config.json; nullopt when there is none. InvalidArgument when it
// is larger than kMaxGenerationConfigFileBytes, Internal when it cannot be read.
absl::StatusOr<std::optional<std::string>> ReadGenerationConfig(const std::string& dir);

}  // namespace pagellm

#endif  // PAGELLM_WORKER_MODEL_MODEL_LOADER_H_
