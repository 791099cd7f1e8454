#include "common/structured/pattern_tree.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace pagellm::structured::pattern {
namespace {

using B = GrammarBuilder;
using Seq = GrammarBuilder::Sequence;

constexpr size_t kInlineSymbols = 8;  // longer concatenations become a rule

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
CharSet Subtract(const CharSet& a, const CharSet& b) {
  CharSet out = a.Complement();
  out.Add(b);
  return out.Complement();
}

// JSON's spellings of the control characters in `controls`: \b \f \n \r \t and \u00XX.
void Controls(const CharSet& controls, std::vector<Seq>* alts) {
  if (controls.empty()) return;
  ByteSet short_escapes;
  ByteSet low[2];  // \u00 0x / \u00 1x: the hex digits x, either case
  constexpr std::string_view kShorts = "\b\f\n\r\t";
  constexpr std::string_view kLetters = "bfnrt";
  constexpr std::string_view kHex = "0123456789abcdef";
  for (const auto& [lo, hi] : controls.ranges()) {
    for (uint32_t c = lo; c <= hi; ++c) {
      if (const size_t k = kShorts.find(static_cast<char>(c)); k != std::string_view::npos) {
        short_escapes.Add(static_cast<uint8_t>(kLetters[k]));
      }
      const char digit = kHex[c & 0xF];
      low[c >> 4].Add(static_cast<uint8_t>(digit));
      low[c >> 4].Add(static_cast<uint8_t>(absl::ascii_toupper(digit)));
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

}  // namespace

uint32_t NextChar(std::string_view text, size_t* pos) {
  const size_t len = Utf8CharLen(text, *pos);
  const auto b = static_cast<uint8_t>(text[*pos]);
  uint32_t c = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<uint8_t>(text[*pos + k]) & 0x3F);
  *pos += len;
  return c;
}

absl::StatusOr<uint32_t> HexEscape(std::string_view text, size_t* pos, char letter) {
  const int digits = letter == 'x' ? 2 : letter == 'u' ? 4 : 8;
  uint32_t cp = 0;
  for (int k = 0; k < digits; ++k, ++*pos) {
    if (*pos >= text.size() || !absl::ascii_isxdigit(static_cast<unsigned char>(text[*pos]))) {
      return absl::InvalidArgumentError(absl::StrCat("bad escape \\", std::string(1, letter), ": ",
                                                     digits, " hex digits expected"));
    }
    const char h = absl::ascii_tolower(static_cast<unsigned char>(text[*pos]));
    cp = cp * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
    if (cp > kMaxCodePoint) return absl::InvalidArgumentError("bad escape: above U+10FFFF");
  }
  if (cp >= kSurrogates.first && cp <= kSurrogates.second) {
    return absl::InvalidArgumentError("bad escape: a surrogate is not a character");
  }
  return cp;
}

// --- CharSet --------------------------------------------------------------------------------

void CharSet::Add(uint32_t lo, uint32_t hi) {
  ranges_.emplace_back(lo, hi);
  Normalize();
}

void CharSet::Add(const CharSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  Normalize();
}

CharSet CharSet::Complement() const {
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

bool CharSet::Has(uint32_t c) const {
  return std::any_of(ranges_.begin(), ranges_.end(),
                     [c](const Range& r) { return r.first <= c && c <= r.second; });
}

CharSet CharSet::Within(uint32_t lo, uint32_t hi) const {
  CharSet out;
  for (const auto& [a, b] : ranges_) {
    if (b >= lo && a <= hi) out.ranges_.emplace_back(std::max(a, lo), std::min(b, hi));
  }
  return out;
}

void CharSet::Normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<Range> merged;
  for (Range r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_.clear();
  for (const auto& [lo, hi] : merged) {
    if (hi < kSurrogates.first || lo > kSurrogates.second) {
      ranges_.emplace_back(lo, hi);
      continue;
    }
    if (lo < kSurrogates.first) ranges_.emplace_back(lo, kSurrogates.first - 1);
    if (hi > kSurrogates.second) ranges_.emplace_back(kSurrogates.second + 1, hi);
  }
}

// --- Tree -----------------------------------------------------------------------------------

Node Tree::Make(Node::Kind kind, bool nullable, std::vector<int> kids) {
  Node n;
  n.kind = kind;
  n.nullable = nullable;
  n.kids = std::move(kids);
  return n;
}

int Tree::Add(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

int Tree::Set(CharSet s) {
  Node n = Make(Node::Kind::kSet, false, {});
  n.set = std::move(s);
  return Add(std::move(n));
}

int Tree::Concat(std::vector<int> kids) {
  if (kids.size() == 1) return kids[0];
  const bool nullable =
      std::all_of(kids.begin(), kids.end(), [this](int k) { return nodes_[k].nullable; });
  return Add(Make(Node::Kind::kConcat, nullable, std::move(kids)));
}

int Tree::Alt(std::vector<int> kids) {
  if (kids.size() == 1) return kids[0];
  const bool nullable =
      std::any_of(kids.begin(), kids.end(), [this](int k) { return nodes_[k].nullable; });
  return Add(Make(Node::Kind::kAlt, nullable, std::move(kids)));
}

int Tree::Repeat(int kid, int min, int max) {
  Node n = Make(Node::Kind::kRepeat, min == 0 || nodes_[kid].nullable, {kid});
  n.min = min;
  n.max = max;
  return Add(std::move(n));
}

int Tree::Ref(int rule) {
  Node n = Make(Node::Kind::kRef, rules_[rule].nullable, {});
  n.rule = rule;
  return Add(std::move(n));
}

int Tree::NewRule(std::string name) {
  rules_.push_back(Rule{.name = std::move(name), .body = kNothing, .nullable = false});
  return static_cast<int>(rules_.size()) - 1;
}

void Tree::ComputeNullable() {
  // Least fixed point by propagation: a node turns nullable when enough of its parts have.
  std::vector<std::vector<int>> parents(nodes_.size());
  std::vector<std::vector<int>> refs(rules_.size());
  std::vector<size_t> nullable_kids(nodes_.size(), 0);
  std::vector<int> work;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    for (int k : n.kids) parents[k].push_back(static_cast<int>(i));
    if (n.kind == Node::Kind::kRef) refs[n.rule].push_back(static_cast<int>(i));
    n.nullable = (n.kind == Node::Kind::kConcat && n.kids.empty()) ||
                 (n.kind == Node::Kind::kRepeat && n.min == 0);
    if (n.nullable) work.push_back(static_cast<int>(i));
  }
  std::vector<std::vector<int>> bodies_of(nodes_.size());  // node -> rules it is the body of
  for (size_t r = 0; r < rules_.size(); ++r) {
    rules_[r].nullable = false;
    if (rules_[r].body != kNothing) bodies_of[rules_[r].body].push_back(static_cast<int>(r));
  }
  auto mark = [&](int node) {
    if (nodes_[node].nullable) return;
    nodes_[node].nullable = true;
    work.push_back(node);
  };
  while (!work.empty()) {
    const int node = work.back();
    work.pop_back();
    for (int r : bodies_of[node]) {
      if (rules_[r].nullable) continue;
      rules_[r].nullable = true;
      for (int ref : refs[r]) mark(ref);
    }
    for (int p : parents[node]) {
      const Node& n = nodes_[p];
      if (n.kind != Node::Kind::kConcat || ++nullable_kids[p] == n.kids.size()) mark(p);
    }
  }
}

int Tree::NonEmpty(int node) {
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
    case Node::Kind::kRef: {
      // A rule of the rule's non-empty strings, declared before its body is built so that
      // recursion through it ends.
      int rule;
      if (auto it = non_empty_rule_.find(n.rule); it != non_empty_rule_.end()) {
        rule = it->second;
      } else {
        rule = NewRule(absl::StrCat(rules_[n.rule].name, " (non-empty)"));
        non_empty_rule_[n.rule] = rule;
        const int body = NonEmpty(rules_[n.rule].body);
        if (body == kNothing) break;  // the rule matches "" alone
        rules_[rule].body = body;
      }
      out = Ref(rule);
      break;
    }
  }
  non_empty_[node] = out;
  return out;
}

// --- Emitter --------------------------------------------------------------------------------

bool Emitter::too_large() const {
  const GrammarLimits limits;
  return b_->num_rules() > static_cast<size_t>(limits.max_rules) ||
         b_->num_symbols() > static_cast<size_t>(limits.max_elements);
}

absl::Status Emitter::SizeStatus(std::string_view what) const {
  if (!too_large()) return absl::OkStatus();
  const GrammarLimits limits;
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), ": the grammar would exceed ", limits.max_rules, " rules or ",
                   limits.max_elements, " symbols (large repeat bounds?)"));
}

uint32_t Emitter::RuleOf(int rule) {
  if (auto it = rules_.find(rule); it != rules_.end()) return it->second;
  const uint32_t id = b_->NewRule(tree_->rule_name(rule));
  rules_[rule] = id;
  const int body = tree_->rule_body(rule);
  if (body == Tree::kNothing) return id;  // no alternative: Build names the rule
  const Node& n = tree_->at(body);
  if (n.kind == Node::Kind::kAlt && !memo_.contains(body)) {  // its alternatives are the rule's
    for (int k : std::vector<int>(n.kids)) b_->AddAlternative(id, Emit(k));
  } else {
    b_->AddAlternative(id, Emit(body));
  }
  return id;
}

Seq Emitter::Emit(int node) {
  if (too_large()) return {};
  if (auto it = memo_.find(node); it != memo_.end()) return {B::Ref(it->second)};
  const Node& n = tree_->at(node);
  switch (n.kind) {
    case Node::Kind::kSet:
      return Set(n.set);
    case Node::Kind::kRef:
      return {B::Ref(RuleOf(n.rule))};
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

// kid{min,max}.
uint32_t Emitter::Repeat(int kid, int min, int max) {
  if (tree_->at(kid).nullable) {  // x{n,m} is (non-empty x){0,m}
    kid = tree_->NonEmpty(kid);
    min = 0;
  }
  if (kid == Tree::kNothing || max == 0) return b_->Rule("empty", {{}});
  Seq item = Emit(kid);
  if (item.size() != 1) item = {B::Ref(b_->Rule("item", {std::move(item)}))};
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

// One character of `set`, spelled as UTF-8 or as inside a JSON string.
Seq Emitter::Set(const CharSet& set) {
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
        out.push_back(B::Bytes(ByteSet::Range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi))));
      }
      alts.push_back(std::move(out));
    }
  };
  if (!json_string_) {
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

}  // namespace pagellm::structured::pattern
