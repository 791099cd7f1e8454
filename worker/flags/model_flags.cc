#include "worker/flags/model_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, model, "", "model: a GGUF file or a Hugging Face checkpoint directory");
ABSL_FLAG(std::string, load_format, "auto",
          "auto | gguf | hf | dummy | mock (no model, for serving benchmarks)");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer (GGUF or tokenizer.json) overriding the model's");
ABSL_FLAG(std::string, dummy_model, "smollm2-135m",
          "shape for --load-format dummy: llama-3-8b, llama-2-7b, llama-2-13b, mistral-7b, "
          "qwen2-7b, smollm2-135m");
ABSL_FLAG(std::string, dummy_dtype, "q4_1",
          "matrix type for --load-format dummy: q4_0, q4_1, q8_0, f16, bf16, f32");
ABSL_FLAG(int32_t, threads, 0, "CPU threads (0: all)");

namespace pagellm::cli {

LoadModelOptions ModelOptionsFromFlags() {
  LoadModelOptions o;
  o.path = absl::GetFlag(FLAGS_model);
  o.format = absl::GetFlag(FLAGS_load_format);
  o.tokenizer_path = absl::GetFlag(FLAGS_tokenizer);
  o.dummy_preset = absl::GetFlag(FLAGS_dummy_model);
  o.dummy_type = absl::GetFlag(FLAGS_dummy_dtype);
  return o;
}

bool IsMockModelFromFlags() { return absl::GetFlag(FLAGS_load_format) == "mock"; }

int ThreadsFromFlags() { return absl::GetFlag(FLAGS_threads); }

}  // namespace pagellm::cli
