// A pattern is parsed into a pattern::Tree (pattern_tree.h), which emits it into the grammar.
#include "common/structured/regex_grammar.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/structured/pattern_tree.h"
#include "common/utf8.h"

namespace pagellm::structured {
namespace {

using pattern::CharSet;
using pattern::Tree;

CharSet Digits() { return CharSet::Of('0', '9'); }
CharSet Word() {
  CharSet s = CharSet::Of('0', '9');
  s.Add('A', 'Z');
  s.Add('a', 'z');
  s.Add('_', '_');
  return s;
}
CharSet Space() {  // \t \n \v \f \r and space
  CharSet s = CharSet::Of('\t', '\r');
  s.Add(' ', ' ');
  return s;
}

// --- The parser -----------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::string_view pattern, Tree* tree) : p_(pattern), tree_(tree) {}

  absl::StatusOr<int> Parse() {
    ASSIGN_OR_RETURN(const int root, Alternation(0));
    if (pos_ < p_.size()) return Error(pos_, "unbalanced parenthesis");
    return root;
  }

 private:
  absl::Status Error(size_t at, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("regex: ", std::string(what), " at offset ", at));
  }
  [[nodiscard]] bool AtEnd() const { return pos_ >= p_.size(); }
  [[nodiscard]] char Peek(size_t ahead = 0) const {
    return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0';
  }
  [[nodiscard]] bool LooksAt(std::string_view s) const { return p_.substr(pos_, s.size()) == s; }
  // The character at pos_, consumed. REQUIRES: !AtEnd(); the pattern is valid UTF-8.
  uint32_t NextChar() { return pattern::NextChar(p_, &pos_); }

  // alternatives separated by '|'; at depth 0 each may be anchored.
  absl::StatusOr<int> Alternation(int depth) {
    std::vector<int> alts;
    while (true) {
      ASSIGN_OR_RETURN(const int seq, Sequence(depth));
      alts.push_back(seq);
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    return tree_->Alt(std::move(alts));
  }

  absl::StatusOr<int> Sequence(int depth) {
    std::vector<int> parts;
    bool ended = false;  // after $ or \Z
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      const size_t at = pos_;
      const bool begin = Peek() == '^' || LooksAt("\\A");
      const bool end = Peek() == '$' || LooksAt("\\Z");
      if (ended && !end) return Error(at, "$ or \\Z before the end of the pattern");
      if (begin || end) {
        if (depth > 0 || (begin && !parts.empty())) {
          return Error(at,
                       "anchors only at the start or end of the pattern (or of a top-level "
                       "alternative)");
        }
        pos_ += Peek() == '\\' ? 2 : 1;
        if (!AtEnd() && QuantifierLength() > 0) {
          return Error(pos_, "nothing to repeat");
        }
        ended = ended || end;
        continue;
      }
      ASSIGN_OR_RETURN(int atom, Atom(depth));
      if (atom == Tree::kNothing) continue;  // a comment
      RETURN_IF_ERROR(Quantifier(&atom));
      parts.push_back(atom);
    }
    if (depth == 0 && Peek() == ')') return Error(pos_, "unbalanced parenthesis");
    return tree_->Concat(std::move(parts));
  }

  // The length of the quantifier at pos_ (0: none, a '{' that is a literal).
  [[nodiscard]] size_t QuantifierLength() const {
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') return 1;
    if (c != '{') return 0;
    size_t i = pos_ + 1;
    while (i < p_.size() && absl::ascii_isdigit(static_cast<unsigned char>(p_[i]))) ++i;
    const bool lo_digits = i > pos_ + 1;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      while (i < p_.size() && absl::ascii_isdigit(static_cast<unsigned char>(p_[i]))) ++i;
    } else if (!lo_digits) {
      return 0;  // "{}" or "{x": literal
    }
    return i < p_.size() && p_[i] == '}' ? i + 1 - pos_ : 0;
  }

  absl::Status Quantifier(int* node) {
    const size_t at = pos_;
    const size_t len = QuantifierLength();
    if (len == 0) return absl::OkStatus();
    int min = 0, max = -1;
    if (Peek() == '+') {
      min = 1;
    } else if (Peek() == '?') {
      max = 1;
    } else if (Peek() == '{') {
      const std::string_view body = p_.substr(pos_ + 1, len - 2);
      const size_t comma = body.find(',');
      const std::string_view lo = body.substr(0, comma);
      const std::string_view hi = comma == std::string_view::npos ? lo : body.substr(comma + 1);
      for (std::string_view digits : {lo, hi}) {
        if (digits.size() > 4 ||
            (!digits.empty() && std::stoi(std::string(digits)) > kMaxRegexRepeat)) {
          return Error(at, absl::StrCat("repeat bound over ", kMaxRegexRepeat));
        }
      }
      min = lo.empty() ? 0 : std::stoi(std::string(lo));
      max = hi.empty() ? -1 : std::stoi(std::string(hi));
      if (max >= 0 && max < min) return Error(at, "min repeat greater than max repeat");
    }
    pos_ += len;
    if (Peek() == '?') {
      ++pos_;  // lazy: the same full matches
    } else if (Peek() == '+') {
      return Error(pos_, "possessive quantifiers are not supported");
    }
    if (QuantifierLength() > 0) return Error(pos_, "multiple repeat");
    *node = tree_->Repeat(*node, min, max);
    return absl::OkStatus();
  }

  // One atom; Tree::kNothing for a comment.
  absl::StatusOr<int> Atom(int depth) {
    const size_t at = pos_;
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?' || (c == '{' && QuantifierLength() > 0)) {
      return Error(at, "nothing to repeat");
    }
    if (c == '(') return Group(depth);
    if (c == '[') {
      ++pos_;
      ASSIGN_OR_RETURN(CharSet set, Class());
      return tree_->Set(std::move(set));
    }
    if (c == '.') {
      ++pos_;
      return tree_->Set(CharSet::Of('\n', '\n').Complement());
    }
    if (c == '\\') {
      ASSIGN_OR_RETURN(CharSet set, Escape(/*in_class=*/false));
      return tree_->Set(std::move(set));
    }
    const uint32_t cp = NextChar();
    return tree_->Set(CharSet::Of(cp, cp));
  }

  absl::StatusOr<int> Group(int depth) {
    const size_t at = pos_;
    ++pos_;  // '('
    if (Peek() == '?') {
      if (LooksAt("?#")) {
        const size_t close = p_.find(')', pos_);
        if (close == std::string_view::npos) return Error(at, "missing ), unterminated comment");
        pos_ = close + 1;
        return Tree::kNothing;
      }
      if (LooksAt("?:")) {
        pos_ += 2;
      } else if (LooksAt("?P<") || (LooksAt("?<") && Peek(2) != '=' && Peek(2) != '!')) {
        pos_ += Peek(1) == 'P' ? 3 : 2;
        const size_t start = pos_;
        while (!AtEnd() &&
               (absl::ascii_isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_')) {
          ++pos_;
        }
        if (pos_ == start || Peek() != '>') return Error(start, "bad group name");
        ++pos_;
      } else if (LooksAt("?=") || LooksAt("?!") || LooksAt("?<=") || LooksAt("?<!")) {
        return Error(at, "lookaround is not supported");
      } else if (LooksAt("?P=")) {
        return Error(at, "backreferences are not supported");
      } else if (LooksAt("?>")) {
        return Error(at, "atomic groups are not supported");
      } else {
        return Error(at, "inline flags and other (?...) extensions are not supported");
      }
    }
    if (depth + 1 > kMaxRegexDepth) {
      return Error(at, absl::StrCat("groups nest deeper than ", kMaxRegexDepth));
    }
    ASSIGN_OR_RETURN(const int inner, Alternation(depth + 1));
    if (Peek() != ')' || AtEnd()) return Error(at, "missing ), unterminated subpattern");
    ++pos_;
    return inner;
  }

  // After '[': the set, through the closing ']'.
  absl::StatusOr<CharSet> Class() {
    const size_t at = pos_ - 1;
    const bool negate = Peek() == '^' && !AtEnd();
    if (negate) ++pos_;
    CharSet set;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error(at, "unterminated character set");
      if (Peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      const size_t item = pos_;
      ASSIGN_OR_RETURN(CharSet lo, ClassItem());
      if (Peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        ASSIGN_OR_RETURN(CharSet hi, ClassItem());
        if (lo.ranges().size() != 1 || lo.ranges()[0].first != lo.ranges()[0].second ||
            hi.ranges().size() != 1 || hi.ranges()[0].first != hi.ranges()[0].second ||
            lo.ranges()[0].first > hi.ranges()[0].first) {
          return Error(item, "bad character range");
        }
        set.Add(lo.ranges()[0].first, hi.ranges()[0].first);
      } else {
        set.Add(lo);
      }
    }
    if (negate) set = set.Complement();
    if (set.empty()) return Error(at, "the character set matches no character");
    return set;
  }

  absl::StatusOr<CharSet> ClassItem() {
    if (Peek() == '\\') return Escape(/*in_class=*/true);
    const uint32_t cp = NextChar();
    return CharSet::Of(cp, cp);
  }

  // At '\': the escape's characters.
  absl::StatusOr<CharSet> Escape(bool in_class) {
    const size_t at = pos_;
    ++pos_;
    if (AtEnd()) return Error(at, "bad escape (end of pattern)");
    const char c = Peek();
    auto one = [](uint32_t cp) { return CharSet::Of(cp, cp); };
    constexpr std::string_view kLetters = "ntrfva";  // \n \t \r \f \v \a
    constexpr std::string_view kControls = "\n\t\r\f\v\a";
    if (const size_t k = kLetters.find(c); k != std::string_view::npos) {
      ++pos_;
      return one(static_cast<uint8_t>(kControls[k]));
    }
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S': {
        ++pos_;
        const char lower = absl::ascii_tolower(static_cast<unsigned char>(c));
        const CharSet s = lower == 'd' ? Digits() : lower == 'w' ? Word() : Space();
        return c == lower ? s : s.Complement();
      }
      case 'b':
        if (!in_class) return Error(at, "word boundaries (\\b) are not supported");
        ++pos_;
        return one('\b');
      case 'x':
      case 'u':
      case 'U': {
        ++pos_;
        auto cp = pattern::HexEscape(p_, &pos_, c);
        if (!cp.ok()) return Error(at, std::string(cp.status().message()));
        return one(*cp);
      }
      case '0':
        ++pos_;
        if (absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) {
          return Error(at, "octal escapes are not supported (\\0 is)");
        }
        return one(0);
      default:
        break;
    }
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return Error(at, "backreferences are not supported");
    }
    if (c == 'A' || c == 'Z' || c == 'B') {
      return Error(at, c == 'B' ? "word boundaries (\\B) are not supported"
                                : "anchors only at the start or end of the pattern");
    }
    if (absl::ascii_isalpha(static_cast<unsigned char>(c))) {
      return Error(at, absl::StrCat("bad escape \\", std::string(1, c)));
    }
    const uint32_t cp = NextChar();  // an escaped metacharacter or other symbol
    return one(cp);
  }

  std::string_view p_;
  size_t pos_ = 0;
  Tree* tree_;
};

}  // namespace

absl::StatusOr<uint32_t> AddRegexRule(std::string_view pattern, RegexText text,
                                      GrammarBuilder* builder) {
  if (!IsValidUtf8(pattern)) return absl::InvalidArgumentError("regex: not valid UTF-8");
  Tree tree;
  Parser parser(pattern, &tree);
  ASSIGN_OR_RETURN(const int root, parser.Parse());
  pattern::Emitter emitter(&tree, text == RegexText::kJsonString, builder);
  GrammarBuilder::Sequence seq = emitter.Emit(root);
  RETURN_IF_ERROR(emitter.SizeStatus("regex"));
  return builder->Rule("regex", {std::move(seq)});
}

absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  GrammarBuilder builder;
  ASSIGN_OR_RETURN(const uint32_t root, AddRegexRule(pattern, RegexText::kRaw, &builder));
  return std::move(builder).Build(root);
}

}  // namespace pagellm::structured
