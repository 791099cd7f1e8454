// libFuzzer target for MergeGenerationConfig (a model's generation_config.json, or
// --override-generation-config, over the defaults so far): any input must give either
// InvalidArgument with the defaults untouched, or defaults a request may hold
// (SamplingParams::Validate) that come out the same when merged again.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/generation_config_fuzz/,
// dictionary tools/fuzz/generation_config.dict).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "common/api/proto_convert.h"
#include "common/api/sampling_defaults.h"
#include "tools/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  pagellm::v1::SamplingParams before;
  before.set_top_k(7);  // defaults from an earlier file
  pagellm::v1::SamplingParams d = before;
  const absl::Status s = pagellm::MergeGenerationConfig(text, "generation_config.json", &d);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(d.SerializeAsString() == before.SerializeAsString());
    return 0;
  }
  FUZZ_CHECK(
      pagellm::SamplingParamsFromProto(d).Validate(std::numeric_limits<int32_t>::max()).ok());
  pagellm::v1::SamplingParams again = d;
  FUZZ_CHECK(pagellm::MergeGenerationConfig(text, "generation_config.json", &again).ok());
  FUZZ_CHECK(again.SerializeAsString() == d.SerializeAsString());
  return 0;
}
