// Repetition is unrolled into one rule per count (bounded) or a self-referencing tail
// (unbounded). Ranges are spelled digit by digit: the integers in [a, b] as digit strings of
// each length between a's and b's, split where the leading digits stop being free.
#include "common/structured/json_number_rules.h"

#include <utility>

#include "common/structured/json_schema_grammar.h"

namespace pagellm::structured {

using Seq = GrammarBuilder::Sequence;
using B = GrammarBuilder;

Seq Cat(std::initializer_list<Seq> parts) {
  Seq out;
  for (const Seq& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// min..max (-1: unbounded) copies of `item`, `sep` between them.
uint32_t JsonNumberRules::Repeat(uint32_t item, int min, int max, const Seq& sep) {
  const Seq sep_item = Cat({sep, {B::Ref(item)}});
  if (max < 0) {
    const uint32_t tail = b_.NewRule("more");
    b_.AddAlternative(tail, {});
    b_.AddAlternative(tail, Cat({sep_item, {B::Ref(tail)}}));
    if (min == 0) return b_.Rule("repeat", {{}, {B::Ref(item), B::Ref(tail)}});
    Seq seq = {B::Ref(item)};
    for (int i = 1; i < min; ++i) seq.insert(seq.end(), sep_item.begin(), sep_item.end());
    seq.push_back(B::Ref(tail));
    return b_.Rule("repeat", {std::move(seq)});
  }
  // rest[k]: what may follow once k copies are out.
  uint32_t next = b_.Rule("repeat_end", {{}});
  for (int k = max - 1; k >= 0; --k) {
    std::vector<Seq> alts;
    if (k >= min) alts.push_back({});
    alts.push_back(Cat({k == 0 ? Seq{B::Ref(item)} : sep_item, {B::Ref(next)}}));
    next = b_.Rule("repeat", std::move(alts));
  }
  return next;
}

// min..max decimal digits.
uint32_t JsonNumberRules::Digits(int min, int max) {
  return Repeat(b_.Rule("digit", {{B::Bytes(ByteSet::Range('0', '9'))}}), min, max, {});
}

uint32_t JsonNumberRules::Integer() {
  if (integer_) return *integer_;
  const uint32_t more = Digits(0, kMaxIntegerDigits - 1);
  const uint32_t uint =
      b_.Rule("uint", {B::Literal("0"), {B::Bytes(ByteSet::Range('1', '9')), B::Ref(more)}});
  integer_ = b_.Rule("integer", {{B::Ref(uint)}, {B::Byte('-'), B::Ref(uint)}});
  return *integer_;
}

uint32_t JsonNumberRules::Number() {
  if (number_) return *number_;
  const uint32_t frac =
      b_.Rule("fraction", {{}, {B::Byte('.'), B::Ref(Digits(1, kMaxFractionDigits))}});
  ByteSet e = ByteSet::Of('e');
  e.Add('E');
  ByteSet sign = ByteSet::Of('+');
  sign.Add('-');
  const uint32_t opt_sign = b_.Rule("sign", {{}, {B::Bytes(sign)}});
  const uint32_t exp = b_.Rule(
      "exponent", {{}, {B::Bytes(e), B::Ref(opt_sign), B::Ref(Digits(1, kMaxExponentDigits))}});
  number_ = b_.Rule("number", {{B::Ref(Integer()), B::Ref(frac), B::Ref(exp)}});
  return *number_;
}

// Numbers within the bounds, written without an exponent (a sound subset: every number has
// such a spelling); nullopt when no number lies within them.
std::optional<uint32_t> JsonNumberRules::NumberRange(std::optional<NumberBound> lo,
                                                     std::optional<NumberBound> hi) {
  std::vector<Seq> alts = NonNegative(lo, hi);
  // x = -y: x >= L  <=>  y <= -L, and x <= H  <=>  y >= -H (strictness kept).
  std::optional<NumberBound> neg_lo, neg_hi;
  if (hi) neg_lo = NumberBound{-hi->value, hi->exclusive};
  if (lo) neg_hi = NumberBound{-lo->value, lo->exclusive};
  for (Seq& seq : NonNegative(neg_lo, neg_hi)) {
    seq.insert(seq.begin(), B::Byte('-'));
    alts.push_back(std::move(seq));
  }
  if (alts.empty()) return std::nullopt;
  return b_.Rule("number range", std::move(alts));
}

// Spellings of y = m.f >= 0 (m the integer part, f the fraction) within the bounds: integer
// parts where any fraction stays within, and the bounds' own integer parts where only some do.
std::vector<Seq> JsonNumberRules::NonNegative(std::optional<NumberBound> lo,
                                              std::optional<NumberBound> hi) {
  std::vector<Seq> out;
  if (hi && (hi->value < 0 || (hi->value == 0 && hi->exclusive))) return out;
  const int64_t a = lo && lo->value >= 0 ? lo->value + (lo->exclusive ? 1 : 0) : 0;
  std::optional<int64_t> b;
  if (hi) b = hi->value - 1;
  if (!b || a <= *b) {
    std::vector<Seq> parts = b ? UintRange(static_cast<uint64_t>(a), static_cast<uint64_t>(*b))
                               : UintRange(static_cast<uint64_t>(a), std::nullopt);
    for (Seq& seq : parts) {
      seq.push_back(B::Ref(Fraction(FractionKind::kAny)));
      out.push_back(std::move(seq));
    }
  }
  if (lo && lo->exclusive && lo->value >= 0 && (!hi || lo->value < hi->value)) {
    out.push_back(Cat({B::Literal(std::to_string(lo->value)),
                       {B::Ref(Fraction(FractionKind::kNonZero))}}));  // just above L
  }
  if (hi && !hi->exclusive &&
      (!lo || (lo->exclusive ? hi->value > lo->value : hi->value >= lo->value))) {
    out.push_back(Cat({B::Literal(std::to_string(hi->value)),
                       {B::Ref(Fraction(FractionKind::kZero))}}));  // H itself
  }
  return out;
}

// An optional fraction (kAny, kZero: "" or ".0..."), or one above zero (kNonZero).
uint32_t JsonNumberRules::Fraction(FractionKind kind) {
  std::optional<uint32_t>& rule = fractions_[static_cast<int>(kind)];
  if (rule) return *rule;
  const uint32_t zero = b_.Rule("zero", {B::Literal("0")});
  switch (kind) {
    case FractionKind::kAny:
      rule = b_.Rule("fraction", {{}, {B::Byte('.'), B::Ref(Digits(1, kMaxFractionDigits))}});
      break;
    case FractionKind::kZero:
      rule = b_.Rule("zero fraction",
                     {{}, {B::Byte('.'), B::Ref(Repeat(zero, 1, kMaxFractionDigits, {}))}});
      break;
    case FractionKind::kNonZero:
      rule = b_.Rule(
          "non-zero fraction",
          {{B::Byte('.'), B::Ref(Repeat(zero, 0, kMaxFractionDigits - 1, {})),
            B::Bytes(ByteSet::Range('1', '9')), B::Ref(Digits(0, kMaxFractionDigits - 1))}});
      break;
  }
  return *rule;
}

// Integers in [lo, hi] (a missing side: unbounded, within kMaxIntegerDigits digits).
uint32_t JsonNumberRules::IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Seq> alts;
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    for (Seq& seq : UintRange(a, hi ? std::optional<uint64_t>(*hi) : std::nullopt)) {
      alts.push_back(std::move(seq));
    }
  }
  if (!lo || *lo < 0) {  // -magnitude for magnitudes in [max(1, -hi), -lo]
    const uint64_t a = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> b;
    if (lo) b = static_cast<uint64_t>(-(*lo + 1)) + 1;
    for (Seq& seq : UintRange(a, b)) {
      seq.insert(seq.begin(), B::Byte('-'));
      alts.push_back(std::move(seq));
    }
  }
  return b_.Rule("integer range", std::move(alts));
}

// Digit strings without leading zeros of the integers in [a, b] (b missing: unbounded).
std::vector<Seq> JsonNumberRules::UintRange(uint64_t a, std::optional<uint64_t> b) {
  const std::string lo = std::to_string(a);
  std::vector<Seq> out;
  const size_t last = b ? std::to_string(*b).size() : lo.size();
  for (size_t len = lo.size(); len <= last; ++len) {
    const std::string from = len == lo.size() ? lo : "1" + std::string(len - 1, '0');
    const std::string to = b && len == last ? std::to_string(*b) : std::string(len, '9');
    SameLength(from, to, {}, &out);
  }
  if (!b && lo.size() < static_cast<size_t>(kMaxIntegerDigits)) {  // every longer number
    out.push_back({B::Bytes(ByteSet::Range('1', '9')),
                   B::Ref(Digits(static_cast<int>(lo.size()), kMaxIntegerDigits - 1))});
  }
  return out;
}

// Appends to `out` sequences matching the digit strings in [lo, hi], both of one length.
void JsonNumberRules::SameLength(const std::string& lo, const std::string& hi, Seq prefix,
                                 std::vector<Seq>* out) {
  const size_t n = lo.size();
  const B::Symbol any = B::Bytes(ByteSet::Range('0', '9'));
  if (n == 0 || lo == hi) {
    for (char c : lo) prefix.push_back(B::Byte(static_cast<uint8_t>(c)));
    out->push_back(std::move(prefix));
    return;
  }
  const bool full = lo.find_first_not_of('0', 1) == std::string::npos &&
                    hi.find_first_not_of('9', 1) == std::string::npos;
  if (full) {  // [lo0-hi0] then any digits
    prefix.push_back(B::Bytes(ByteSet::Range(lo[0], hi[0])));
    prefix.insert(prefix.end(), n - 1, any);
    out->push_back(std::move(prefix));
    return;
  }
  if (lo[0] == hi[0]) {
    prefix.push_back(B::Byte(static_cast<uint8_t>(lo[0])));
    SameLength(lo.substr(1), hi.substr(1), std::move(prefix), out);
    return;
  }
  Seq low = prefix;
  low.push_back(B::Byte(static_cast<uint8_t>(lo[0])));
  SameLength(lo.substr(1), std::string(n - 1, '9'), std::move(low), out);
  if (hi[0] - lo[0] > 1) {
    Seq mid = prefix;
    mid.push_back(B::Bytes(ByteSet::Range(lo[0] + 1, hi[0] - 1)));
    mid.insert(mid.end(), n - 1, any);
    out->push_back(std::move(mid));
  }
  prefix.push_back(B::Byte(static_cast<uint8_t>(hi[0])));
  SameLength(std::string(n - 1, '0'), hi.substr(1), std::move(prefix), out);
}

}  // namespace pagellm::structured
