// libFuzzer target for the tokenizer.json reader: VocabSpecFromHfTokenizerJson, then
// Tokenizer::Create on what it accepted (as Tokenizer::FromHfTokenizerJson does). Any input must
// give InvalidArgument, Unimplemented, or a tokenizer that encodes a fixed text to ids in
// [0, vocab_size()) and decodes those (and every id) to valid UTF-8.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/hf_tokenizer_json_fuzz/,
// dictionary tools/fuzz/hf_tokenizer_json.dict).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/hf_tokenizer_json.h"
#include "common/tokenizer/tokenizer.h"
#include "common/utf8.h"
#include "spdlog/spdlog.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

constexpr std::string_view kText =
    "Hello world, <s>ab 12345 é\xF0\x9F\x98\x80\n\t  x</s><|im_end|>";

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto spec = pagellm::VocabSpecFromHfTokenizerJson(json);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument ||
               spec.status().code() == absl::StatusCode::kUnimplemented);
    return 0;
  }
  auto tok = pagellm::Tokenizer::Create(*std::move(spec));
  if (!tok.ok()) {
    FUZZ_CHECK(tok.status().code() == absl::StatusCode::kInvalidArgument ||
               tok.status().code() == absl::StatusCode::kUnimplemented);
    return 0;
  }
  const pagellm::Tokenizer& t = **tok;
  for (bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = t.Encode(kText, /*add_special_tokens=*/true, parse_special);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < t.vocab_size());
    FUZZ_CHECK(pagellm::IsValidUtf8(t.Decode(ids, /*skip_special=*/false)));
  }
  // Every id and the two just out of range.
  std::vector<int32_t> ids = {-1, t.vocab_size()};
  for (int32_t id = 0; id < t.vocab_size(); ++id) ids.push_back(id);
  FUZZ_CHECK(pagellm::IsValidUtf8(t.Decode(ids, /*skip_special=*/false)));
  FUZZ_CHECK(pagellm::IsValidUtf8(t.Decode(ids, /*skip_special=*/true)));
  return 0;
}
