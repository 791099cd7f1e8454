// libFuzzer target for structured output's compilers and matcher (common/structured/): the
// bytes are a mode byte, a regex pattern, a JSON Schema or a GBNF grammar (the mode byte
// modulo 3 says which), a NUL, and a text to feed the compiled grammar one byte at a time
// (tokens are single bytes).
//
// Invariants (abort() when one fails): compiling either succeeds or returns InvalidArgument
// (never a crash, a hang, or unbounded memory); at every step the token mask holds exactly the
// bytes Accept() takes; a state the text reached can always be finished (a byte is allowed or
// the output may end) -- for grammars that can_finish() at all, as the engine refuses others.
//
// Build and run: see tools/fuzz/run_ci.sh (seeds in tools/fuzz/seeds/structured_grammar_fuzz/;
// dictionary tools/fuzz/structured_grammar.dict).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/structured/gbnf_grammar.h"
#include "common/structured/grammar_matcher.h"
#include "common/structured/json_schema_grammar.h"
#include "common/structured/regex_grammar.h"
#include "tools/fuzz/fuzz_check.h"

namespace {

using pagellm::structured::GrammarMatcher;

std::shared_ptr<const pagellm::structured::TokenVocabulary> ByteVocab() {
  static const auto* kBytes = [] {
    auto* v = new std::vector<std::string>;
    for (int b = 0; b < 256; ++b) v->push_back(std::string(1, static_cast<char>(b)));
    return v;
  }();
  static const auto vocab = *pagellm::structured::TokenVocabulary::Create(
      256, [](int32_t id) { return std::string_view((*kBytes)[id]); },
      [](int32_t) { return true; });
  return vocab;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view spec = rest.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? "" : rest.substr(nul + 1);

  absl::StatusOr<pagellm::structured::Grammar> grammar =
      data[0] % 3 == 0   ? pagellm::structured::RegexGrammar(spec)
      : data[0] % 3 == 1 ? pagellm::structured::JsonSchemaGrammar(spec)
                         : pagellm::structured::GbnfGrammar(spec);
  if (!grammar.ok()) {
    FUZZ_CHECK(grammar.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  pagellm::structured::MatcherLimits limits;
  limits.max_nodes = 1 << 14;
  limits.max_states = 1 << 12;
  auto compiled =
      pagellm::structured::CompiledGrammar::Create(*std::move(grammar), ByteVocab(), limits);
  if (!compiled->can_finish()) return 0;  // refused, as the engine refuses it
  GrammarMatcher matcher(compiled);
  std::vector<uint64_t> mask(4);
  for (size_t i = 0; i <= text.size() && i < 64; ++i) {
    if (matcher.grammar().exhausted()) return 0;
    std::fill(mask.begin(), mask.end(), 0);
    matcher.FillNextTokenMask(absl::MakeSpan(mask));
    bool any = false;
    for (int b = 0; b < 256; ++b) {
      GrammarMatcher probe = matcher;
      const absl::Status st = probe.Accept(b);
      if (st.code() == absl::StatusCode::kResourceExhausted) return 0;
      const bool allowed = (mask[b >> 6] >> (b & 63)) & 1;
      FUZZ_CHECK(allowed == st.ok());
      any = any || allowed;
    }
    FUZZ_CHECK(any || matcher.CanEnd());
    if (i == text.size() || !matcher.Accept(static_cast<uint8_t>(text[i])).ok()) break;
  }
  return 0;
}
