// Test support for common/structured/: a byte-per-token vocabulary, whole-string acceptance, and
// the fixture tools/fixtures/make_structured_fixture.py writes (independent verdicts from
// Python's json, re and jsonschema). Header-only; tests only.
#ifndef PAGELLM_COMMON_STRUCTURED_GRAMMAR_TEST_UTIL_H_
#define PAGELLM_COMMON_STRUCTURED_GRAMMAR_TEST_UTIL_H_

#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "common/structured/grammar.h"
#include "common/structured/grammar_matcher.h"
#include "common/structured/token_vocabulary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm::structured::test_util {

inline constexpr char kFixture[] = ".cache/fixtures/structured/cases.json";

// Token b is the byte b.
inline std::shared_ptr<const TokenVocabulary> ByteVocab() {
  static const auto* kBytes = [] {
    auto* v = new std::vector<std::string>;
    for (int b = 0; b < 256; ++b) v->push_back(std::string(1, static_cast<char>(b)));
    return v;
  }();
  return *TokenVocabulary::Create(
      256, [](int32_t id) { return std::string_view((*kBytes)[id]); },
      [](int32_t) { return true; });
}

// Whether the whole of `text` is a complete output of `matcher`'s grammar.
inline bool Accepts(GrammarMatcher matcher, std::string_view text) {
  for (char c : text) {
    if (!matcher.Accept(static_cast<uint8_t>(c)).ok()) return false;
  }
  return matcher.CanEnd();
}

inline std::shared_ptr<CompiledGrammar> Compile(
    absl::StatusOr<Grammar> g, std::shared_ptr<const TokenVocabulary> vocab = nullptr,
    const MatcherLimits& limits = MatcherLimits()) {
  EXPECT_TRUE(g.ok()) << g.status();
  return CompiledGrammar::Create(*std::move(g), vocab ? vocab : ByteVocab(), limits);
}

// The fixture, or nullopt when it was not generated.
inline std::optional<nlohmann::json> Fixture() {
  std::ifstream in(kFixture);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

// `g` failed with InvalidArgument and a message holding `message` (`input` names the case).
inline void ExpectRefused(const absl::StatusOr<Grammar>& g, std::string_view message,
                          std::string_view input) {
  ASSERT_FALSE(g.ok()) << input;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << input;
  EXPECT_THAT(std::string(g.status().message()), ::testing::HasSubstr(std::string(message)))
      << input;
}

// A fixture case's bytes.
inline std::string Hex(const nlohmann::json& c) {
  return absl::HexStringToBytes(c["text_hex"].get<std::string>());
}

// Expects `g` to accept exactly the fixture `cases` marked valid; counts the valid and invalid.
inline void ExpectVerdicts(const std::shared_ptr<CompiledGrammar>& g, const nlohmann::json& cases,
                           int* valid, int* invalid) {
  for (const auto& c : cases) {
    const std::string text = Hex(c);
    const bool want = c["valid"].get<bool>();
    EXPECT_EQ(Accepts(GrammarMatcher(g), text), want) << absl::CHexEscape(text);
    (want ? *valid : *invalid) += 1;
  }
}

}  // namespace pagellm::structured::test_util

#endif  // PAGELLM_COMMON_STRUCTURED_GRAMMAR_TEST_UTIL_H_
