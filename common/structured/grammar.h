// Grammar: a context-free grammar over bytes -- what structured output compiles to (a JSON
// Schema, "any JSON object", a choice of strings; json_schema_grammar.h) and what
// GrammarMatcher (grammar_matcher.h) runs against a tokenizer's vocabulary.
//
// A grammar is a list of rules; a rule is a list of alternatives; an alternative is a sequence
// of symbols, each a set of bytes (matches one byte in the set) or a reference to a rule. The
// empty alternative matches the empty string. Repetition is written with right recursion
// (`chars ::= "" | char chars`), which the matcher runs in constant stack depth.
//
// Storage is flat: every alternative's elements lie in one array, each alternative ended by an
// kEnd element, so a matcher position is one element index and advancing is index + 1.
//
// Build() refuses what a matcher could not run in bounded time: a rule referenced but never
// defined, a rule with no alternative, left recursion (a rule reaching itself through a prefix
// that can match the empty string: expanding it would never consume a byte), and grammars
// larger than GrammarLimits.
//
// Grammar is an immutable value, safe to share between threads; GrammarBuilder is not
// thread-safe.
#ifndef PAGELLM_COMMON_STRUCTURED_GRAMMAR_H_
#define PAGELLM_COMMON_STRUCTURED_GRAMMAR_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pagellm::structured {

struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet Of(uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
  static ByteSet Range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return s;
  }
  void Add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  void Remove(uint8_t b) { words[b >> 6] &= ~(uint64_t{1} << (b & 63)); }
  [[nodiscard]] bool Has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  friend bool operator==(const ByteSet& a, const ByteSet& b) { return a.words == b.words; }
};

struct GrammarLimits {
  int max_rules = 16384;
  int max_elements = 1 << 18;  // symbols over all alternatives
};

class Grammar {
 public:
  enum class Kind : uint8_t { kEnd, kBytes, kRule };
  struct Element {
    Kind kind = Kind::kEnd;
    uint32_t index = 0;  // kBytes: a byte set; kRule: a rule
  };

  [[nodiscard]] uint32_t root() const { return root_; }
  [[nodiscard]] const Element& element(uint32_t pos) const { return elements_[pos]; }
  [[nodiscard]] const ByteSet& byte_set(uint32_t index) const { return byte_sets_[index]; }
  // The positions of the first elements of `rule`'s alternatives.
  [[nodiscard]] absl::Span<const uint32_t> alternatives(uint32_t rule) const {
    return absl::MakeConstSpan(alt_starts_.data() + rule_alts_[rule],
                               rule_alts_[rule + 1] - rule_alts_[rule]);
  }
  [[nodiscard]] size_t num_rules() const { return rule_alts_.size() - 1; }
  [[nodiscard]] size_t num_elements() const { return elements_.size(); }
  [[nodiscard]] const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

 private:
  friend class GrammarBuilder;
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<uint32_t> alt_starts_;  // per alternative, rule by rule
  std::vector<uint32_t> rule_alts_;   // rule r's alternatives: alt_starts_[rule_alts_[r], [r+1])
  std::vector<std::string> names_;
  uint32_t root_ = 0;
};

class GrammarBuilder {
 public:
  struct Symbol {
    bool is_rule = false;
    uint32_t rule = 0;
    ByteSet bytes;
  };
  using Sequence = std::vector<Symbol>;

  static Symbol Bytes(const ByteSet& set) { return Symbol{.bytes = set}; }
  static Symbol Byte(uint8_t b) { return Bytes(ByteSet::Of(b)); }
  static Symbol Ref(uint32_t rule) { return Symbol{.is_rule = true, .rule = rule, .bytes = {}}; }
  // The bytes of `text`, one symbol each.
  static Sequence Literal(std::string_view text);

  // Declares a rule (defined by AddAlternative, possibly after other rules reference it).
  // `name` is for error messages only.
  uint32_t NewRule(std::string name);
  void AddAlternative(uint32_t rule, Sequence sequence);
  // A new rule with these alternatives.
  uint32_t Rule(std::string name, std::vector<Sequence> alternatives);

  [[nodiscard]] size_t num_rules() const { return rules_.size(); }
  [[nodiscard]] size_t num_symbols() const { return num_symbols_; }

  // The grammar starting at `root`. InvalidArgument for an undefined rule, left recursion or a
  // grammar over `limits` (the message names the rule).
  absl::StatusOr<Grammar> Build(uint32_t root, const GrammarLimits& limits = GrammarLimits()) &&;

 private:
  struct RuleDef {
    std::string name;
    std::vector<Sequence> alternatives;
  };
  std::vector<RuleDef> rules_;
  size_t num_symbols_ = 0;
};

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_GRAMMAR_H_
