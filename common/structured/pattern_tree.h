// Internal to common/structured/: the tree that regular expressions (regex_grammar.cc) and
// GBNF grammars (gbnf_grammar.cc) are parsed into -- character sets, concatenations,
// alternations, bounded or unbounded repeats and references to named rules -- and its emission
// into a GrammarBuilder.
//
// Emission: a set becomes one byte set or a rule of UTF-8 byte sequences (or, for a JSON
// string's body, of JSON's spellings of the characters); an alternation and a repeat become
// rules; a rule reference becomes a reference to the rule's own grammar rule. A repeat of
// something that can match the empty string would be left-recursive, which GrammarBuilder
// refuses; it is emitted as a repeat of its non-empty part instead ((x?)* and x* match the
// same strings), which Tree::NonEmpty() builds. Repeats cost the sum of their bounds, not the
// product; emission stops once the grammar outgrows GrammarLimits, so that a short pattern of
// many large repeats cannot take unbounded memory.
//
// Not thread-safe; one Tree per compilation.
#ifndef PAGELLM_COMMON_STRUCTURED_PATTERN_TREE_H_
#define PAGELLM_COMMON_STRUCTURED_PATTERN_TREE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/structured/grammar.h"

namespace pagellm::structured::pattern {

using Range = std::pair<uint32_t, uint32_t>;  // closed
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr Range kSurrogates = {0xD800, 0xDFFF};

// A set of Unicode scalar values: sorted, disjoint, non-adjacent closed ranges; surrogates are
// never members (they are not characters, and UTF-8 cannot hold them).
class CharSet {
 public:
  static CharSet Of(uint32_t lo, uint32_t hi) {
    CharSet s;
    s.Add(lo, hi);
    return s;
  }
  static CharSet Any() { return Of(0, kMaxCodePoint); }
  void Add(uint32_t lo, uint32_t hi);
  void Add(const CharSet& other);
  [[nodiscard]] CharSet Complement() const;
  [[nodiscard]] bool Has(uint32_t c) const;
  // The members in [lo, hi].
  [[nodiscard]] CharSet Within(uint32_t lo, uint32_t hi) const;
  // A single character (a range's end in a class).
  [[nodiscard]] bool single() const {
    return ranges_.size() == 1 && ranges_[0].first == ranges_[0].second;
  }
  [[nodiscard]] bool empty() const { return ranges_.empty(); }
  [[nodiscard]] const std::vector<Range>& ranges() const { return ranges_; }

 private:
  void Normalize();
  std::vector<Range> ranges_;
};

// The character at text[*pos], consumed. REQUIRES: *pos < text.size(); text is valid UTF-8.
uint32_t NextChar(std::string_view text, size_t* pos);

// After an escape's letter (x, u or U: 2, 4 or 8 hex digits): the character they spell,
// consumed. InvalidArgument ("bad escape: ...", no offset) for too few digits, a value above
// U+10FFFF or a surrogate.
absl::StatusOr<uint32_t> HexEscape(std::string_view text, size_t* pos, char letter);

struct Node {
  enum class Kind : uint8_t { kSet, kConcat, kAlt, kRepeat, kRef };
  Kind kind = Kind::kConcat;
  bool nullable = true;  // matches the empty string
  CharSet set;
  std::vector<int> kids;
  int min = 0, max = -1;  // kRepeat: kids[0], min..max times (-1: unbounded)
  int rule = -1;          // kRef
};

class Tree {
 public:
  static constexpr int kNothing = -1;  // NonEmpty's "no string at all"

  int Set(CharSet s);
  int Concat(std::vector<int> kids);  // the empty concatenation matches the empty string
  int Alt(std::vector<int> kids);
  int Repeat(int kid, int min, int max);
  int Ref(int rule);

  // Named rules (GBNF): declared, referenced, then given a body.
  int NewRule(std::string name);
  void SetBody(int rule, int node) { rules_[rule].body = node; }
  [[nodiscard]] size_t num_rules() const { return rules_.size(); }
  [[nodiscard]] const std::string& rule_name(int rule) const { return rules_[rule].name; }
  [[nodiscard]] int rule_body(int rule) const { return rules_[rule].body; }

  // Settles which nodes and rules match the empty string, through rule references. Needed once
  // every rule has its body when the tree has references (without them, nodes know at birth).
  void ComputeNullable();

  [[nodiscard]] const Node& at(int i) const { return nodes_[i]; }
  // A node matching the non-empty strings `node` matches, or kNothing when there are none.
  int NonEmpty(int node);

 private:
  struct Rule {
    std::string name;
    int body = kNothing;
    bool nullable = false;
  };
  static Node Make(Node::Kind kind, bool nullable, std::vector<int> kids);
  int Add(Node n);

  std::vector<Node> nodes_;
  std::vector<Rule> rules_;
  absl::flat_hash_map<int, int> non_empty_;       // node -> NonEmpty(node)
  absl::flat_hash_map<int, int> non_empty_rule_;  // rule -> the rule of its non-empty strings
};

// Emits tree nodes into a GrammarBuilder (see the file comment).
class Emitter {
 public:
  // `json_string`: characters as JSON spells them inside a string (regex_grammar.h's
  // RegexText::kJsonString); otherwise as their UTF-8 bytes.
  Emitter(Tree* tree, bool json_string, GrammarBuilder* builder)
      : tree_(tree), json_string_(json_string), b_(builder) {}

  // Symbols matching exactly the strings of `node` (or anything, once too_large()).
  GrammarBuilder::Sequence Emit(int node);
  // The grammar rule of the tree's `rule` (emitted on first use).
  uint32_t RuleOf(int rule);
  // True once the grammar outgrew GrammarLimits (Build would refuse it); what was emitted since
  // is incomplete.
  [[nodiscard]] bool too_large() const;
  // InvalidArgument "`what`: the grammar would exceed ..." when too_large(), else OK.
  [[nodiscard]] absl::Status SizeStatus(std::string_view what) const;

 private:
  uint32_t Remember(int node, uint32_t rule) {
    memo_[node] = rule;
    return rule;
  }
  uint32_t Repeat(int kid, int min, int max);
  GrammarBuilder::Sequence Set(const CharSet& set);

  Tree* tree_;
  bool json_string_;
  GrammarBuilder* b_;
  absl::flat_hash_map<int, uint32_t> memo_;   // node -> its rule
  absl::flat_hash_map<int, uint32_t> rules_;  // tree rule -> grammar rule
  absl::flat_hash_map<std::vector<Range>, GrammarBuilder::Sequence> sets_;
};

}  // namespace pagellm::structured::pattern

#endif  // PAGELLM_COMMON_STRUCTURED_PATTERN_TREE_H_
