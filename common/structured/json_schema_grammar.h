// Grammars for structured output, vLLM's and OpenAI's request kinds:
//   - JsonObjectGrammar: any JSON object (response_format {"type": "json_object"});
//   - JsonSchemaGrammar: a JSON value valid under a JSON Schema (response_format json_schema,
//     vLLM's structured_outputs.json / guided_json);
//   - ChoiceGrammar: exactly one of a list of strings (vLLM's choice / guided_choice).
//
// The JSON produced is RFC 8259 JSON: strings hold valid UTF-8 (no control bytes; escapes
// \" \\ \/ \b \f \n \r \t \uXXXX), numbers in JSON's syntax with at most kMaxIntegerDigits,
// kMaxFractionDigits and kMaxExponentDigits digits. Between tokens it allows runs of at most
// kMaxJsonWhitespace whitespace bytes, so a model can indent but cannot stall in an endless run
// of newlines or zeros. The document is the value alone: no whitespace before or after.
//
// Supported JSON Schema (draft 2020-12 and the OpenAI subset; what pydantic emits):
//   type (a name or a list of names): object, array, string, integer, number, boolean, null;
//   properties + required (properties are generated in the schema's order; optional ones may
//   be left out); additionalProperties false or absent (no other keys, as OpenAI's strict mode
//   and vLLM's default), or any schema when there are no properties (a map); items,
//   prefixItems (tuples, as pydantic writes tuple[int, str]; items after them, false: none),
//   minItems,
//   maxItems; minLength, maxLength (in characters; a surrogate-pair escape is one); pattern
//   (regex_grammar.h's syntax; the string is a full match of it -- JSON Schema asks only for a
//   match somewhere, so every output validates -- written with raw UTF-8, never \uXXXX, and
//   not next to minLength, maxLength or format); format
//   date, time, date-time, uuid, ipv4, email (a subset of each: dates from year 1000 with
//   February's days 01-28, times with an offset, emails local@domain of common characters);
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum on integers (exact) and, with whole-
//   number bounds, on numbers (exact; such numbers are written without an exponent); enum; const;
//   anyOf; oneOf (as anyOf: the alternatives pydantic emits are disjoint); allOf of one schema;
//   $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed); true (anything).
//   A keyword of one type without a type (e.g. only "minimum") generates that type.
// Annotations are ignored: title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly.
// Anything else -- other formats, fractional bounds on numbers, multipleOf,
// uniqueItems, patternProperties, if/then/else, not, ... -- is refused with
// InvalidArgument naming the keyword and where it is, never ignored: the output would not be
// guaranteed to validate.
//
// Thread-safe: pure functions.
#ifndef PAGELLM_COMMON_STRUCTURED_JSON_SCHEMA_GRAMMAR_H_
#define PAGELLM_COMMON_STRUCTURED_JSON_SCHEMA_GRAMMAR_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/structured/grammar.h"

namespace pagellm::structured {

inline constexpr int kMaxJsonWhitespace = 16;
// Numbers have at most this many digits in each part (a model can stall in an endless run of
// zeros as in one of newlines; 20 digits hold any int64 or double written out).
inline constexpr int kMaxIntegerDigits = 20;
inline constexpr int kMaxFractionDigits = 20;
inline constexpr int kMaxExponentDigits = 3;
// Schemas nest at most this deep, and minItems/maxItems/minLength/maxLength are at most
// kMaxJsonRepeat (each bound becomes a rule per count).
inline constexpr int kMaxSchemaDepth = 32;
inline constexpr int kMaxJsonRepeat = 1024;

absl::StatusOr<Grammar> JsonObjectGrammar();
// InvalidArgument: `schema` is not JSON, not a schema, or uses an unsupported keyword.
absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema);
// The output is one of `choices`, byte for byte. InvalidArgument when there are none.
absl::StatusOr<Grammar> ChoiceGrammar(absl::Span<const std::string> choices);

}  // namespace pagellm::structured

#endif  // PAGELLM_COMMON_STRUCTURED_JSON_SCHEMA_GRAMMAR_H_
