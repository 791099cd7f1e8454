// libFuzzer target for ParseHfConfig (config.json -> ModelConfig, with ParseStrictJson under it):
// any input must give either an error or a config that passes ModelConfig::Validate(), names a
// known architecture, and comes out the same when parsed again.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/hf_config_fuzz/, dictionary
// tools/fuzz/hf_config.dict).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "spdlog/spdlog.h"
#include "tools/fuzz/fuzz_check.h"
#include "worker/model/hf_config.h"

namespace {}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  spdlog::set_level(spdlog::level::off);  // the sliding-window warning would flood the output
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = pagellm::ParseHfConfig(text);
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(config->Validate().ok());
  FUZZ_CHECK(config->architecture == "llama" || config->architecture == "qwen2");
  if (config->architecture == "qwen2") FUZZ_CHECK(config->attention_bias);
  auto again = pagellm::ParseHfConfig(text);
  FUZZ_CHECK(again.ok() && again->vocab_size == config->vocab_size &&
             again->head_dim == config->head_dim &&
             again->max_position_embeddings == config->max_position_embeddings);
  return 0;
}
