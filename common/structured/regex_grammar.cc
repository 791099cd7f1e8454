// A pattern is parsed into a small tree (character sets, concatenations, alternations,
// repeats), then emitted into the grammar: a set as one byte set or as a rule of UTF-8 byte
// sequences, an alternation and a repeat as rules. A repeat of something that can match the
// empty string would be left-recursive, which GrammarBuilder refuses; it is emitted as a repeat
// of its non-empty part instead ((x?)* and x* match the same strings), built by NonEmpty().
#include "common/structured/regex_grammar.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace pagellm::structured {
namespace {

using B = GrammarBuilder;
using Seq = GrammarBuilder::Sequence;
using Range = std::pair<uint32_t, uint32_t>;  // closed

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr Range kSurrogates = {0xD800, 0xDFFF};

// A set of Unicode scalar values: sorted, disjoint, non-adjacent closed ranges.
class CharSet {
 public:
  static CharSet Of(uint32_t lo, uint32_t hi) {
    CharSet s;
    s.Add(lo, hi);
    return s;
  }
  void Add(uint32_t lo, uint32_t hi) {
    ranges_.emplace_back(lo, hi);
    Normalize();
  }
  void Add(const CharSet& other) {
    ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
    Normalize();
  }
  [[nodiscard]] CharSet Complement() const {
    CharSet out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : ranges_) {
      if (lo > next) out.ranges_.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= kMaxCodePoint) out.ranges_.emplace_back(next, kMaxCodePoint);
    out.Normalize();
    return out;
  }
  [[nodiscard]] bool Has(uint32_t c) const {
    return std::any_of(ranges_.begin(), ranges_.end(),
                       [c](const Range& r) { return r.first <= c && c <= r.second; });
  }
  // The members in [lo, hi].
  [[nodiscard]] CharSet Within(uint32_t lo, uint32_t hi) const {
    CharSet out;
    for (const auto& [a, b] : ranges_) {
      if (b >= lo && a <= hi) out.ranges_.emplace_back(std::max(a, lo), std::min(b, hi));
    }
    return out;
  }
  [[nodiscard]] bool empty() const { return ranges_.empty(); }
  [[nodiscard]] const std::vector<Range>& ranges() const { return ranges_; }

 private:
  // Sorts, merges, and leaves out the surrogates (not characters; UTF-8 cannot hold them).
  void Normalize() {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<Range> out;
    for (Range r : ranges_) {
      if (!out.empty() && r.first <= out.back().second + 1) {
        out.back().second = std::max(out.back().second, r.second);
      } else {
        out.push_back(r);
      }
    }
    ranges_.clear();
    for (const auto& [lo, hi] : out) {
      if (hi < kSurrogates.first || lo > kSurrogates.second) {
        ranges_.emplace_back(lo, hi);
        continue;
      }
      if (lo < kSurrogates.first) ranges_.emplace_back(lo, kSurrogates.first - 1);
      if (hi > kSurrogates.second) ranges_.emplace_back(kSurrogates.second + 1, hi);
    }
  }

  std::vector<Range> ranges_;
};

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

// The byte-range sequences whose concatenations are exactly the UTF-8 encodings of the
// characters in [lo, hi] (no surrogate in it), appended to `out`. Splits the range until every
// byte position varies independently: at each continuation-byte boundary either the ends agree
// above it or they span it completely.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<Range>>* out) {
  for (uint32_t last : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // one encoded length per range
    if (lo <= last && last < hi) {
      Utf8Sequences(lo, last, out);
      Utf8Sequences(last + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4 && hi >= 0x80; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      Utf8Sequences(lo, lo | m, out);
      Utf8Sequences((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      Utf8Sequences(lo, (hi & ~m) - 1, out);
      Utf8Sequences(hi & ~m, hi, out);
      return;
    }
  }
  std::string a, b;
  AppendCodepoint(lo, &a);
  AppendCodepoint(hi, &b);
  std::vector<Range> seq;
  for (size_t k = 0; k < a.size(); ++k) {
    seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  }
  out->push_back(std::move(seq));
}

// --- The tree -------------------------------------------------------------------------------

struct Node {
  enum class Kind : uint8_t { kSet, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;
  bool nullable = true;  // matches the empty string
  CharSet set;
  std::vector<int> kids;
  int min = 0, max = -1;  // kRepeat: kids[0], min..max times (-1: unbounded)
};

class Tree {
 public:
  static constexpr int kNothing = -1;  // NonEmpty's "no string at all"

  int Set(CharSet s) {
    Node n = Make(Node::Kind::kSet, false, {});
    n.set = std::move(s);
    return Add(std::move(n));
  }
  int Concat(std::vector<int> kids) {
    if (kids.size() == 1) return kids[0];
    const bool nullable =
        std::all_of(kids.begin(), kids.end(), [this](int k) { return nodes_[k].nullable; });
    return Add(Make(Node::Kind::kConcat, nullable, std::move(kids)));
  }
  int Alt(std::vector<int> kids) {
    if (kids.size() == 1) return kids[0];
    const bool nullable =
        std::any_of(kids.begin(), kids.end(), [this](int k) { return nodes_[k].nullable; });
    return Add(Make(Node::Kind::kAlt, nullable, std::move(kids)));
  }
  int Repeat(int kid, int min, int max) {
    Node n = Make(Node::Kind::kRepeat, min == 0 || nodes_[kid].nullable, {kid});
    n.min = min;
    n.max = max;
    return Add(std::move(n));
  }
  [[nodiscard]] const Node& at(int i) const { return nodes_[i]; }

  // A node matching the non-empty strings `node` matches, or kNothing when there are none.
  int NonEmpty(int node) {
    if (!nodes_[node].nullable) return node;
    if (auto it = non_empty_.find(node); it != non_empty_.end()) return it->second;
    const Node n = nodes_[node];
    int out = kNothing;
    switch (n.kind) {
      case Node::Kind::kSet:
        out = node;
        break;
      case Node::Kind::kAlt: {
        std::vector<int> kids;
        for (int k : n.kids) {
          if (int ne = NonEmpty(k); ne != kNothing) kids.push_back(ne);
        }
        if (!kids.empty()) out = Alt(std::move(kids));
        break;
      }
      case Node::Kind::kConcat: {
        // Every part can be empty. From the back: suffix = parts i.., and its non-empty strings
        // start with a non-empty part i or are the non-empty strings of parts i+1...
        int suffix = kNothing;  // kNothing here: the empty suffix
        for (size_t i = n.kids.size(); i-- > 0;) {
          const int part = n.kids[i];
          const int ne = NonEmpty(part);
          std::vector<int> alts;
          if (ne != kNothing) alts.push_back(suffix == kNothing ? ne : Concat({ne, suffix}));
          if (out != kNothing) alts.push_back(out);
          out = alts.empty() ? kNothing : Alt(std::move(alts));
          suffix = suffix == kNothing ? part : Concat({part, suffix});
        }
        break;
      }
      case Node::Kind::kRepeat: {
        // x{n,m} with x nullable is x{0,m}; its non-empty strings: a non-empty x, then x{0,m-1}.
        const int ne = n.max == 0 ? kNothing : NonEmpty(n.kids[0]);
        if (ne == kNothing) break;
        out = n.max == 1 ? ne : Concat({ne, Repeat(n.kids[0], 0, n.max < 0 ? -1 : n.max - 1)});
        break;
      }
    }
    non_empty_[node] = out;
    return out;
  }

 private:
  static Node Make(Node::Kind kind, bool nullable, std::vector<int> kids) {
    Node n;
    n.kind = kind;
    n.nullable = nullable;
    n.kids = std::move(kids);
    return n;
  }
  int Add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }

  std::vector<Node> nodes_;
  absl::flat_hash_map<int, int> non_empty_;
};

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
  uint32_t NextChar() {
    const size_t len = Utf8CharLen(p_, pos_);
    auto b = static_cast<uint8_t>(p_[pos_]);
    uint32_t c = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<uint8_t>(p_[pos_ + k]) & 0x3F);
    pos_ += len;
    return c;
  }

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
        const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        ++pos_;
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k, ++pos_) {
          const char h = Peek();
          if (AtEnd() || !absl::ascii_isxdigit(static_cast<unsigned char>(h))) {
            return Error(at, absl::StrCat("bad escape \\", std::string(1, c), ": ", digits,
                                          " hex digits expected"));
          }
          cp = cp * 16 + static_cast<uint32_t>(absl::ascii_isdigit(static_cast<unsigned char>(h))
                                                   ? h - '0'
                                                   : absl::ascii_tolower(h) - 'a' + 10);
          if (cp > kMaxCodePoint) return Error(at, "bad escape: above U+10FFFF");
        }
        if (cp >= kSurrogates.first && cp <= kSurrogates.second) {
          return Error(at, "bad escape: a surrogate is not a character");
        }
        return one(cp);
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

// --- Emitting -------------------------------------------------------------------------------

class Emitter {
 public:
  Emitter(Tree* tree, RegexText text, GrammarBuilder* b) : tree_(tree), text_(text), b_(b) {}

  // True once the grammar outgrew GrammarLimits (Build would refuse it): emitting stops early,
  // so that a short pattern of many large repeats cannot take unbounded memory.
  [[nodiscard]] bool too_large() const {
    const GrammarLimits limits;
    return b_->num_rules() > static_cast<size_t>(limits.max_rules) ||
           b_->num_symbols() > static_cast<size_t>(limits.max_elements);
  }

  // Symbols matching exactly the strings of `node` (or anything, once too_large()).
  Seq Emit(int node) {
    if (too_large()) return {};
    if (auto it = memo_.find(node); it != memo_.end()) return {B::Ref(it->second)};
    const Node& n = tree_->at(node);
    switch (n.kind) {
      case Node::Kind::kSet:
        return Set(n.set);
      case Node::Kind::kConcat: {
        Seq seq;
        for (int k : std::vector<int>(n.kids)) {
          const Seq part = Emit(k);
          seq.insert(seq.end(), part.begin(), part.end());
        }
        if (seq.size() <= kInlineSymbols) return seq;
        return {B::Ref(Remember(node, b_->Rule("sequence", {std::move(seq)})))};
      }
      case Node::Kind::kAlt: {
        std::vector<Seq> alts;
        for (int k : std::vector<int>(n.kids)) alts.push_back(Emit(k));
        return {B::Ref(Remember(node, b_->Rule("alternation", std::move(alts))))};
      }
      case Node::Kind::kRepeat:
        return {B::Ref(Remember(node, Repeat(n.kids[0], n.min, n.max)))};
    }
    return {};
  }

 private:
  static constexpr size_t kInlineSymbols = 8;  // longer concatenations become a rule

  uint32_t Remember(int node, uint32_t rule) {
    memo_[node] = rule;
    return rule;
  }

  // kid{min,max}.
  uint32_t Repeat(int kid, int min, int max) {
    if (tree_->at(kid).nullable) {  // x{n,m} is (non-empty x){0,m}
      kid = tree_->NonEmpty(kid);
      min = 0;
    }
    if (kid == Tree::kNothing || max == 0) return b_->Rule("empty", {{}});
    Seq item = Emit(kid);
    if (item.size() > 1) item = {B::Ref(b_->Rule("item", {std::move(item)}))};
    uint32_t rest;  // what may follow the min required copies
    if (max < 0) {
      rest = b_->NewRule("star");
      b_->AddAlternative(rest, {});
      b_->AddAlternative(rest, {item[0], B::Ref(rest)});
    } else {
      rest = b_->Rule("repeat_end", {{}});
      for (int k = min; k < max && !too_large(); ++k) {
        rest = b_->Rule("optional", {{}, {item[0], B::Ref(rest)}});
      }
    }
    Seq seq(static_cast<size_t>(min), item[0]);
    seq.push_back(B::Ref(rest));
    return b_->Rule("repeat", {std::move(seq)});
  }

  // One character of `set`, as the text kind spells it.
  Seq Set(const CharSet& set) {
    if (auto it = sets_.find(set.ranges()); it != sets_.end()) return it->second;
    std::vector<Seq> alts;
    ByteSet single;  // one-byte spellings, gathered into one symbol
    bool any_single = false;
    auto add_utf8 = [&](const CharSet& s) {
      std::vector<std::vector<Range>> seqs;
      for (const auto& [lo, hi] : s.ranges()) Utf8Sequences(lo, hi, &seqs);
      for (const std::vector<Range>& seq : seqs) {
        if (seq.size() == 1) {
          single.AddRange(static_cast<uint8_t>(seq[0].first), static_cast<uint8_t>(seq[0].second));
          any_single = true;
          continue;
        }
        Seq out;
        for (const auto& [lo, hi] : seq) {
          out.push_back(
              B::Bytes(ByteSet::Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi))));
        }
        alts.push_back(std::move(out));
      }
    };
    if (text_ == RegexText::kRaw) {
      add_utf8(set);
    } else {
      CharSet specials = CharSet::Of('"', '"');
      specials.Add('\\', '\\');
      for (const Range& r : specials.ranges()) {  // quote and backslash: escaped
        if (set.Has(r.first)) {
          alts.push_back({B::Byte('\\'), B::Byte(static_cast<uint8_t>(r.first))});
        }
      }
      add_utf8(Subtract(set.Within(0x20, kMaxCodePoint), specials));
      Controls(set.Within(0, 0x1F), &alts);
    }
    if (any_single) alts.push_back({B::Bytes(single)});
    Seq out = alts.size() == 1 && alts[0].size() == 1
                  ? alts[0]
                  : Seq{B::Ref(b_->Rule("character", std::move(alts)))};
    sets_[set.ranges()] = out;
    return out;
  }

  static CharSet Subtract(const CharSet& a, const CharSet& b) {
    CharSet out = a.Complement();
    out.Add(b);
    return out.Complement();
  }

  // JSON's spellings of the control characters in `controls`: \b \f \n \r \t and \u00XX.
  static void Controls(const CharSet& controls, std::vector<Seq>* alts) {
    if (controls.empty()) return;
    ByteSet short_escapes;
    ByteSet low[2];  // \u00 0x / \u00 1x: the hex digits x, either case
    for (const auto& [lo, hi] : controls.ranges()) {
      for (uint32_t c = lo; c <= hi; ++c) {
        const char* shorts = "\b\f\n\r\t";
        const char* letters = "bfnrt";
        for (int k = 0; k < 5; ++k) {
          if (static_cast<uint32_t>(shorts[k]) == c) short_escapes.Add(letters[k]);
        }
        const uint32_t digit = c & 0xF;
        const char* hex = "0123456789abcdef";
        low[c >> 4].Add(static_cast<uint8_t>(hex[digit]));
        low[c >> 4].Add(static_cast<uint8_t>(absl::ascii_toupper(hex[digit])));
      }
    }
    if (short_escapes != ByteSet()) alts->push_back({B::Byte('\\'), B::Bytes(short_escapes)});
    for (int high = 0; high < 2; ++high) {
      if (low[high] == ByteSet()) continue;
      Seq seq = B::Literal("\\u00");
      seq.push_back(B::Byte(static_cast<uint8_t>('0' + high)));
      seq.push_back(B::Bytes(low[high]));
      alts->push_back(std::move(seq));
    }
  }

  Tree* tree_;
  RegexText text_;
  GrammarBuilder* b_;
  absl::flat_hash_map<int, uint32_t> memo_;
  absl::flat_hash_map<std::vector<Range>, Seq> sets_;
};

}  // namespace

absl::StatusOr<uint32_t> AddRegexRule(std::string_view pattern, RegexText text,
                                      GrammarBuilder* builder) {
  if (!IsValidUtf8(pattern)) return absl::InvalidArgumentError("regex: not valid UTF-8");
  Tree tree;
  Parser parser(pattern, &tree);
  ASSIGN_OR_RETURN(const int root, parser.Parse());
  Emitter emitter(&tree, text, builder);
  Seq seq = emitter.Emit(root);
  if (emitter.too_large()) {
    const GrammarLimits limits;
    return absl::InvalidArgumentError(
        absl::StrCat("regex: the pattern's grammar would exceed ", limits.max_rules, " rules or ",
                     limits.max_elements, " symbols (large repeat bounds?)"));
  }
  return builder->Rule("regex", {std::move(seq)});
}

absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  GrammarBuilder builder;
  ASSIGN_OR_RETURN(const uint32_t root, AddRegexRule(pattern, RegexText::kRaw, &builder));
  return std::move(builder).Build(root);
}

}  // namespace pagellm::structured
