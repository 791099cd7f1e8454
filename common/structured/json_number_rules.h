// JsonNumberRules: grammar rules the JSON Schema compiler builds numbers and repetitions from --
// bounded repetition with a separator, digit strings, any JSON integer or number, and numbers
// or integers confined to a range (minimum / maximum, exclusive or not). Each rule is added to
// the borrowed GrammarBuilder when first asked for; the unbounded integer, number and
// fractions are made once.
//
// Not thread-safe: one compiler, one builder.
#ifndef PAGELLM_COMMON_STRUCTURED_JSON_NUMBER_RULES_H_
#define PAGELLM_COMMON_STRUCTURED_JSON_NUMBER_RULES_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/structured/grammar.h"

namespace pagellm::structured {

// The concatenation of `parts`.
GrammarBuilder::Sequence Cat(std::initializer_list<GrammarBuilder::Sequence> parts);

class JsonNumberRules {
 public:
  using Seq = GrammarBuilder::Sequence;

  explicit JsonNumberRules(GrammarBuilder* builder) : b_(*builder) {}

  // min..max (-1: unbounded) copies of `item`, `sep` between them.
  uint32_t Repeat(uint32_t item, int min, int max, const Seq& sep);
  // min..max decimal digits.
  uint32_t Digits(int min, int max);
  // Any JSON integer / number (at most kMaxIntegerDigits, kMaxFractionDigits and
  // kMaxExponentDigits digits).
  uint32_t Integer();
  uint32_t Number();

  struct NumberBound {
    int64_t value;  // a whole number
    bool exclusive;
  };
  // Numbers within the bounds, written without an exponent (a sound subset: every number has
  // such a spelling); nullopt when no number lies within them.
  std::optional<uint32_t> NumberRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi);
  // Integers in [lo, hi] (a missing side: unbounded, within kMaxIntegerDigits digits).
  uint32_t IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi);
  // Alternatives matching the digit strings in [lo, hi], both of one length ("01".."31").
  std::vector<Seq> DigitStrings(const std::string& lo, const std::string& hi) {
    std::vector<Seq> out;
    SameLength(lo, hi, {}, &out);
    return out;
  }

 private:
  enum class FractionKind { kAny, kZero, kNonZero };
  std::vector<Seq> NonNegative(std::optional<NumberBound> lo, std::optional<NumberBound> hi);
  uint32_t Fraction(FractionKind kind);
  std::vector<Seq> UintRange(uint64_t a, std::optional<uint64_t> b);
  void SameLength(const std::string& lo, const std::string& hi, Seq prefix, std::vector<Seq>* out);

  GrammarBuilder& b_;
  std::optional<uint32_t> integer_, number_;
  std::optional<uint32_t> fractions_[3];  // by FractionKind
};

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_JSON_NUMBER_RULES_H_
