// Recursive descent over the text into a pattern::Tree (pattern_tree.h): one tree rule per
// GBNF rule, references resolved by name once every definition is read.
#include "common/structured/gbnf_grammar.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/structured/pattern_tree.h"
#include "common/structured/regex_grammar.h"
#include "common/utf8.h"

namespace pagellm::structured {
namespace {

using pattern::CharSet;
using pattern::Tree;

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, Tree* tree) : t_(text), tree_(tree) {}

  // The root rule, once every definition is read and every reference resolved.
  absl::StatusOr<int> Parse() {
    SkipSpace();
    while (!AtEnd()) {
      const size_t at = pos_;
      const std::string name = Name();
      if (name.empty()) return Error(at, "expected a rule name");
      SkipSpace();
      if (t_.substr(pos_, 3) != "::=") {
        return Error(pos_, absl::StrCat("expected ::= after '", name, "'"));
      }
      pos_ += 3;
      SkipSpace();
      const int rule = RuleNamed(name);
      if (defined_[rule]) return Error(at, absl::StrCat("rule '", name, "' is defined twice"));
      defined_[rule] = true;
      ASSIGN_OR_RETURN(const int body, Alternation(0));
      tree_->SetBody(rule, body);
    }
    for (size_t r = 0; r < defined_.size(); ++r) {
      if (!defined_[r]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar: rule '", tree_->rule_name(static_cast<int>(r)), "' is not defined"));
      }
    }
    auto root = rules_.find("root");
    if (root == rules_.end()) return absl::InvalidArgumentError("grammar: no rule named root");
    return root->second;
  }

 private:
  absl::Status Error(size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar: ", std::string(what), " at offset ", at));
  }
  [[nodiscard]] bool AtEnd() const { return pos_ >= t_.size(); }
  [[nodiscard]] char Peek() const { return AtEnd() ? '\0' : t_[pos_]; }

  void SkipSpace() {
    while (!AtEnd()) {
      if (Peek() == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else if (absl::ascii_isspace(static_cast<unsigned char>(Peek()))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string Name() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }

  // Whether the next definition ("name ::=") starts here.
  [[nodiscard]] bool AtDefinition() const {
    size_t i = pos_;
    while (i < t_.size() && IsNameChar(t_[i])) ++i;
    if (i == pos_) return false;
    while (i < t_.size() && absl::ascii_isspace(static_cast<unsigned char>(t_[i]))) ++i;
    return t_.substr(i, 3) == "::=";
  }

  int RuleNamed(const std::string& name) {
    auto [it, added] = rules_.try_emplace(name, 0);
    if (added) {
      it->second = tree_->NewRule(name);
      defined_.push_back(false);
    }
    return it->second;
  }

  absl::StatusOr<int> Alternation(int depth) {
    std::vector<int> alts;
    while (true) {
      ASSIGN_OR_RETURN(const int seq, Sequence(depth));
      alts.push_back(seq);
      if (Peek() != '|') break;
      ++pos_;
      SkipSpace();
    }
    return tree_->Alt(std::move(alts));
  }

  absl::StatusOr<int> Sequence(int depth) {
    std::vector<int> parts;
    while (!AtEnd() && Peek() != '|' && Peek() != ')' && !AtDefinition()) {
      ASSIGN_OR_RETURN(int item, Primary(depth));
      SkipSpace();
      RETURN_IF_ERROR(Quantifiers(&item));
      parts.push_back(item);
    }
    if (depth == 0 && Peek() == ')') return Error(pos_, "unbalanced parenthesis");
    return tree_->Concat(std::move(parts));
  }

  absl::StatusOr<int> Primary(int depth) {
    const size_t at = pos_;
    const char c = Peek();
    if (c == '"') {
      ++pos_;
      std::vector<int> chars;
      while (true) {
        if (AtEnd()) return Error(at, "unterminated string");
        if (Peek() == '"') break;
        ASSIGN_OR_RETURN(const uint32_t cp, Char());
        chars.push_back(tree_->Set(CharSet::Of(cp, cp)));
      }
      ++pos_;
      return tree_->Concat(std::move(chars));
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++pos_;
      return tree_->Set(CharSet::Any());
    }
    if (c == '(') {
      if (depth + 1 > kMaxRegexDepth) {
        return Error(at, absl::StrCat("groups nest deeper than ", kMaxRegexDepth));
      }
      ++pos_;
      SkipSpace();
      ASSIGN_OR_RETURN(const int inner, Alternation(depth + 1));
      if (Peek() != ')') return Error(at, "missing )");
      ++pos_;
      return inner;
    }
    if (IsNameChar(c)) return tree_->Ref(RuleNamed(Name()));
    return Error(at, absl::StrCat("unexpected '", std::string(1, c), "'"));
  }

  // Zero or more quantifiers after an item, each applied to what came before.
  absl::Status Quantifiers(int* item) {
    while (!AtEnd()) {
      const size_t at = pos_;
      int min = 0, max = -1;
      if (Peek() == '*') {
        ++pos_;
      } else if (Peek() == '+') {
        ++pos_;
        min = 1;
      } else if (Peek() == '?') {
        ++pos_;
        max = 1;
      } else if (Peek() == '{') {
        ++pos_;
        ASSIGN_OR_RETURN(const int lo, Bound(/*empty=*/0));
        int hi = lo;
        if (Peek() == ',') {
          ++pos_;
          ASSIGN_OR_RETURN(hi, Bound(/*empty=*/-1));
        } else if (t_[pos_ - 1] == '{') {
          return Error(at, "a repeat needs a count: {m}, {m,}, {m,n} or {,n}");
        }
        if (Peek() != '}') return Error(at, "expected } after a repeat count");
        ++pos_;
        if (hi >= 0 && hi < lo) return Error(at, "min repeat greater than max repeat");
        min = lo;
        max = hi;
      } else {
        return absl::OkStatus();
      }
      *item = tree_->Repeat(*item, min, max);
      SkipSpace();
    }
    return absl::OkStatus();
  }

  // Decimal digits, or `empty` when there are none.
  absl::StatusOr<int> Bound(int empty) {
    const size_t start = pos_;
    int value = 0;
    while (!AtEnd() && absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) {
      value = value * 10 + (Peek() - '0');
      if (value > kMaxRegexRepeat) {
        return Error(start, absl::StrCat("repeat bound over ", kMaxRegexRepeat));
      }
      ++pos_;
    }
    return pos_ == start ? empty : value;
  }

  // After '[': through the closing ']'.
  absl::StatusOr<int> Class() {
    const size_t at = pos_++;
    const bool negate = Peek() == '^';
    if (negate) ++pos_;
    CharSet set;
    while (true) {
      if (AtEnd()) return Error(at, "unterminated character class");
      if (Peek() == ']') break;
      ASSIGN_OR_RETURN(const uint32_t lo, Char());
      uint32_t hi = lo;
      if (Peek() == '-' && pos_ + 1 < t_.size() && t_[pos_ + 1] != ']') {
        ++pos_;
        const size_t range_at = pos_;
        ASSIGN_OR_RETURN(hi, Char());
        if (hi < lo) return Error(range_at, "bad character range");
      }
      set.Add(lo, hi);
    }
    ++pos_;
    if (negate) set = set.Complement();
    if (set.empty()) return Error(at, "the character class matches no character");
    return tree_->Set(std::move(set));
  }

  // One character of a literal or a class, escapes decoded. REQUIRES: !AtEnd().
  absl::StatusOr<uint32_t> Char() {
    const size_t at = pos_;
    if (Peek() != '\\') return pattern::NextChar(t_, &pos_);
    ++pos_;
    if (AtEnd()) return Error(at, "bad escape (end of grammar)");
    const char e = t_[pos_++];
    constexpr std::string_view kLetters = "nrt";
    constexpr std::string_view kControls = "\n\r\t";
    if (const size_t k = kLetters.find(e); k != std::string_view::npos) {
      return static_cast<uint32_t>(kControls[k]);
    }
    if (e == 'x' || e == 'u' || e == 'U') {
      auto cp = pattern::HexEscape(t_, &pos_, e);
      if (!cp.ok()) return Error(at, std::string(cp.status().message()));
      return *cp;
    }
    if (absl::ascii_isalnum(static_cast<unsigned char>(e)) || static_cast<uint8_t>(e) >= 0x80) {
      return Error(at, absl::StrCat("bad escape \\", std::string(1, e)));
    }
    return static_cast<uint32_t>(e);  // \\ \" \[ \] \- ...: the character itself
  }

  std::string_view t_;
  size_t pos_ = 0;
  Tree* tree_;
  absl::flat_hash_map<std::string, int> rules_;  // name -> tree rule
  std::vector<bool> defined_;                    // by tree rule
};

}  // namespace

absl::StatusOr<Grammar> GbnfGrammar(std::string_view text) {
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError("grammar: not valid UTF-8");
  Tree tree;
  GbnfParser parser(text, &tree);
  ASSIGN_OR_RETURN(const int root, parser.Parse());
  tree.ComputeNullable();
  GrammarBuilder builder;
  pattern::Emitter emitter(&tree, /*json_string=*/false, &builder);
  const uint32_t root_rule = emitter.RuleOf(root);
  RETURN_IF_ERROR(emitter.SizeStatus("grammar"));
  return std::move(builder).Build(root_rule);
}

}  // namespace pagellm::structured
