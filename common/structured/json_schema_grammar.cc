// A JSON Schema is compiled top-down into one rule per schema node; $ref targets get one rule
// each, created before their body so that recursive schemas refer to themselves. The JSON
// building blocks (whitespace, strings, numbers, any value) are made once per grammar, on first
// use.
#include "common/structured/json_schema_grammar.h"

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
#include "common/structured/json_number_rules.h"
#include "common/structured/regex_grammar.h"
#include "nlohmann/json.hpp"

namespace pagellm::structured {
namespace {

using Json = nlohmann::ordered_json;
using Seq = GrammarBuilder::Sequence;
using B = GrammarBuilder;

absl::Status Unsupported(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("JSON schema at '", path.empty() ? "/" : path, "': ", what));
}

class JsonGrammarCompiler {
 public:
  // Any JSON value; objects, arrays, strings, numbers as JSON allows.
  uint32_t Value() {
    if (value_) return *value_;
    value_ = b_.NewRule("value");
    for (uint32_t r : {Object(std::nullopt), Array(std::nullopt, 0, -1), String(0, -1),
                       numbers_.Number(), Literal("true"), Literal("false"), Literal("null")}) {
      b_.AddAlternative(*value_, {B::Ref(r)});
    }
    return *value_;
  }

  // An object whose values are `values` (any value when nullopt), with any keys.
  uint32_t Object(std::optional<uint32_t> values) {
    const uint32_t v = values ? *values : Value();
    if (auto it = maps_.find(v); it != maps_.end()) return it->second;
    const uint32_t member = b_.Rule("member", {Cat({{B::Ref(String(0, -1)), B::Ref(Ws())},
                                                    B::Literal(":"),
                                                    {B::Ref(Ws())},
                                                    {B::Ref(v), B::Ref(Ws())}})});
    const uint32_t obj = Delimited("object", '{', member, '}', 0, -1);
    maps_[v] = obj;
    return obj;
  }

  // "[" items "]" with min..max (-1: unbounded) items of `item` (any value when nullopt).
  uint32_t Array(std::optional<uint32_t> item, int min, int max) {
    const uint32_t v = item ? *item : Value();
    const uint32_t elem = b_.Rule("element", {{B::Ref(v), B::Ref(Ws())}});
    return Delimited("array", '[', elem, ']', min, max);
  }

  // A JSON string of min..max (-1: unbounded) characters.
  uint32_t String(int min, int max) {
    if (min == 0 && max < 0 && string_) return *string_;
    const uint32_t s = b_.Rule("string", {Cat({B::Literal("\""),
                                               {B::Ref(numbers_.Repeat(Char(), min, max, {}))},
                                               B::Literal("\"")})});
    if (min == 0 && max < 0) string_ = s;
    return s;
  }

  uint32_t Literal(const std::string& text) {
    return b_.Rule(absl::StrCat("'", text, "'"), {B::Literal(text)});
  }

  // The schema at `path` (a JSON pointer, for messages).
  absl::StatusOr<uint32_t> Schema(const Json& s, const std::string& path, int depth);

  void SetRoot(const Json* root) { root_ = root; }
  GrammarBuilder& builder() { return b_; }

 private:
  // At most kMaxJsonWhitespace bytes of JSON whitespace.
  uint32_t Ws() {
    if (ws_) return *ws_;
    ByteSet space = ByteSet::Of(' ');
    space.Add('\t');
    space.Add('\n');
    space.Add('\r');
    uint32_t next = b_.Rule("ws_end", {{}});
    for (int i = 0; i < kMaxJsonWhitespace; ++i) {
      next = b_.Rule("ws", {{}, {B::Bytes(space), B::Ref(next)}});
    }
    ws_ = next;
    return *ws_;
  }

  // One character of a JSON string: printable ASCII but '"' and '\', an escape, or one UTF-8
  // encoded character of 2-4 bytes.
  uint32_t Char() {
    if (char_) return *char_;
    ByteSet plain = ByteSet::Range(0x20, 0x7f);
    plain.Remove('"');
    plain.Remove('\\');
    // UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates, nothing above U+10FFFF.
    const B::Symbol cont = B::Bytes(ByteSet::Range(0x80, 0xbf));
    auto range = [](uint8_t lo, uint8_t hi) { return B::Bytes(ByteSet::Range(lo, hi)); };
    ByteSet simple_escape;
    for (char c : std::string_view("\"\\/bfnrt")) simple_escape.Add(static_cast<uint8_t>(c));
    ByteSet hex = ByteSet::Range('0', '9');
    hex.AddRange('a', 'f');
    hex.AddRange('A', 'F');
    const B::Symbol h = B::Bytes(hex);
    ByteSet d = ByteSet::Of('d'), high = ByteSet::Range('8', '9'), low = ByteSet::Range('c', 'f');
    d.Add('D');
    high.AddRange('a', 'b');
    high.AddRange('A', 'B');
    low.AddRange('C', 'F');
    char_ = b_.Rule("char", {{B::Bytes(plain)},
                             {B::Byte('\\'), B::Bytes(simple_escape)},
                             {B::Byte('\\'), B::Byte('u'), h, h, h, h},
                             // A surrogate pair is one character (for minLength/maxLength).
                             {B::Byte('\\'), B::Byte('u'), B::Bytes(d), B::Bytes(high), h, h,
                              B::Byte('\\'), B::Byte('u'), B::Bytes(d), B::Bytes(low), h, h},
                             {range(0xc2, 0xdf), cont},
                             {B::Byte(0xe0), range(0xa0, 0xbf), cont},
                             {range(0xe1, 0xec), cont, cont},
                             {B::Byte(0xed), range(0x80, 0x9f), cont},
                             {range(0xee, 0xef), cont, cont},
                             {B::Byte(0xf0), range(0x90, 0xbf), cont, cont},
                             {range(0xf1, 0xf3), cont, cont, cont},
                             {B::Byte(0xf4), range(0x80, 0x8f), cont, cont}});
    return *char_;
  }

  // open ws [item ("," ws item)*] close, with min..max items; `item` ends with its own ws.
  uint32_t Delimited(std::string name, char open, uint32_t item, char close, int min, int max) {
    const Seq comma = {B::Byte(','), B::Ref(Ws())};
    const uint32_t items = numbers_.Repeat(item, min, max, comma);
    return b_.Rule(std::move(name), {{B::Byte(static_cast<uint8_t>(open)), B::Ref(Ws()),
                                      B::Ref(items), B::Byte(static_cast<uint8_t>(close))}});
  }

  // The text of a string of JSON Schema `format` (without quotes); nullopt if unsupported.
  // Each is a subset of what the format allows: dates from year 1000 with days 01-28 in
  // February, times with seconds 00-59 and an offset, UUIDs, IPv4 without leading zeros,
  // emails as local@domain.tld of the common characters.
  std::optional<uint32_t> Format(const std::string& format) {
    auto digits = [](char lo, char hi) { return B::Bytes(ByteSet::Range(lo, hi)); };
    const B::Symbol d = digits('0', '9');
    if (format == "date" || format == "date-time") {
      std::vector<Seq> month_days;
      for (const char* m31 : {"01", "03", "05", "07", "08", "10", "12"}) {
        month_days.push_back(Cat({B::Literal(m31), B::Literal("-"), {B::Ref(Day("31"))}}));
      }
      for (const char* m30 : {"04", "06", "09", "11"}) {
        month_days.push_back(Cat({B::Literal(m30), B::Literal("-"), {B::Ref(Day("30"))}}));
      }
      month_days.push_back(Cat({B::Literal("02-"), {B::Ref(Day("28"))}}));
      const uint32_t md = b_.Rule("month-day", std::move(month_days));
      const uint32_t date =
          b_.Rule("date", {{digits('1', '9'), d, d, d, B::Byte('-'), B::Ref(md)}});
      if (format == "date") return date;
      return b_.Rule("date-time", {{B::Ref(date), B::Byte('T'), B::Ref(*Format("time"))}});
    }
    if (format == "time") {
      const uint32_t hour =
          b_.Rule("hour", {{digits('0', '1'), d}, {B::Byte('2'), digits('0', '3')}});
      const uint32_t minute = b_.Rule("minute", {{digits('0', '5'), d}});
      const uint32_t frac =
          b_.Rule("fraction", {{}, {B::Byte('.'), B::Ref(numbers_.Digits(1, 9))}});
      ByteSet sign = ByteSet::Of('+');
      sign.Add('-');
      const uint32_t offset = b_.Rule(
          "offset", {{B::Byte('Z')}, {B::Bytes(sign), B::Ref(hour), B::Byte(':'), B::Ref(minute)}});
      return b_.Rule("time", {{B::Ref(hour), B::Byte(':'), B::Ref(minute), B::Byte(':'),
                               B::Ref(minute), B::Ref(frac), B::Ref(offset)}});
    }
    if (format == "uuid") {
      ByteSet hex = ByteSet::Range('0', '9');
      hex.AddRange('a', 'f');
      hex.AddRange('A', 'F');
      Seq seq;
      for (int group : {8, 4, 4, 4, 12}) {
        if (!seq.empty()) seq.push_back(B::Byte('-'));
        seq.insert(seq.end(), group, B::Bytes(hex));
      }
      return b_.Rule("uuid", {std::move(seq)});
    }
    if (format == "ipv4") {
      const uint32_t octet = b_.Rule("octet", {{d},
                                               {digits('1', '9'), d},
                                               {B::Byte('1'), d, d},
                                               {B::Byte('2'), digits('0', '4'), d},
                                               {B::Byte('2'), B::Byte('5'), digits('0', '5')}});
      return b_.Rule("ipv4", {{B::Ref(octet), B::Byte('.'), B::Ref(octet), B::Byte('.'),
                               B::Ref(octet), B::Byte('.'), B::Ref(octet)}});
    }
    if (format == "email") {
      ByteSet label = ByteSet::Range('a', 'z');
      label.AddRange('A', 'Z');
      label.AddRange('0', '9');
      ByteSet local = label;
      for (char c : std::string_view("._%+-")) local.Add(static_cast<uint8_t>(c));
      label.Add('-');
      const uint32_t lchar = b_.Rule("local", {{B::Bytes(local)}});
      const uint32_t dchar = b_.Rule("label", {{B::Bytes(label)}});
      const uint32_t word = numbers_.Repeat(dchar, 1, 63, {});
      const uint32_t domain = numbers_.Repeat(word, 2, 4, {B::Byte('.')});
      return b_.Rule("email",
                     {{B::Ref(numbers_.Repeat(lchar, 1, 64, {})), B::Byte('@'), B::Ref(domain)}});
    }
    return std::nullopt;
  }

  // A day of the month, 01 to `last` ("28", "30" or "31").
  uint32_t Day(const std::string& last) {
    return b_.Rule("day", numbers_.DigitStrings("01", last));
  }

  // Exactly `value`: objects with its keys in its order, whitespace as anywhere; strings and
  // numbers as nlohmann writes them (UTF-8 unescaped).
  uint32_t Const(const Json& value) {
    if (!value.is_object() && !value.is_array()) return Literal(value.dump());
    const bool object = value.is_object();
    Seq seq = {B::Byte(object ? '{' : '['), B::Ref(Ws())};
    bool first = true;
    for (const auto& [key, v] : value.items()) {
      if (!first) seq.insert(seq.end(), {B::Byte(','), B::Ref(Ws())});
      first = false;
      if (object) {
        const Seq k = B::Literal(Json(key).dump());
        seq.insert(seq.end(), k.begin(), k.end());
        seq.insert(seq.end(), {B::Ref(Ws()), B::Byte(':'), B::Ref(Ws())});
      }
      seq.insert(seq.end(), {B::Ref(Const(v)), B::Ref(Ws())});
    }
    seq.push_back(B::Byte(object ? '}' : ']'));
    return b_.Rule("const", {std::move(seq)});
  }

  absl::StatusOr<uint32_t> Ref(const std::string& ref, const std::string& path, int depth);
  absl::StatusOr<uint32_t> Typed(const Json& s, const std::string& type, const std::string& path,
                                 int depth);
  absl::StatusOr<uint32_t> ObjectSchema(const Json& s, const std::string& path, int depth);
  // An array under prefixItems (a tuple: item k under prefixItems[k], then items), min..max
  // (-1: unbounded) items.
  absl::StatusOr<uint32_t> TupleSchema(const Json& s, int min, int max, const std::string& path,
                                       int depth);

  GrammarBuilder b_;
  const Json* root_ = nullptr;
  JsonNumberRules numbers_{&b_};  // after b_, which it adds to
  std::optional<uint32_t> value_, string_, ws_, char_;
  absl::flat_hash_map<uint32_t, uint32_t> maps_;     // value rule -> object rule
  absl::flat_hash_map<std::string, uint32_t> refs_;  // $ref -> its rule
};

const absl::flat_hash_set<std::string_view>& Annotations() {
  static const auto* kSet = new absl::flat_hash_set<std::string_view>{
      "title",    "description", "default",  "examples",  "$schema", "$id",
      "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
  return *kSet;
}

const absl::flat_hash_set<std::string_view>& Supported() {
  static const auto* kSet = new absl::flat_hash_set<std::string_view>{"type",
                                                                      "properties",
                                                                      "required",
                                                                      "additionalProperties",
                                                                      "items",
                                                                      "prefixItems",
                                                                      "minItems",
                                                                      "maxItems",
                                                                      "minLength",
                                                                      "maxLength",
                                                                      "enum",
                                                                      "const",
                                                                      "anyOf",
                                                                      "oneOf",
                                                                      "allOf",
                                                                      "$ref",
                                                                      "format",
                                                                      "pattern",
                                                                      "minimum",
                                                                      "maximum",
                                                                      "exclusiveMinimum",
                                                                      "exclusiveMaximum"};
  return *kSet;
}

absl::StatusOr<int> Bound(const Json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return -1;
  const Json& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxJsonRepeat) {
    return Unsupported(path, absl::StrCat(key, " must be an integer in [0, ", kMaxJsonRepeat, "]"));
  }
  return static_cast<int>(v.get<int64_t>());
}

absl::StatusOr<uint32_t> JsonGrammarCompiler::Schema(const Json& s, const std::string& path,
                                                     int depth) {
  if (depth > kMaxSchemaDepth) {
    return Unsupported(path, absl::StrCat("nested deeper than ", kMaxSchemaDepth));
  }
  if (s.is_boolean()) {
    if (s.get<bool>()) return Value();
    return Unsupported(path, "the schema false matches nothing");
  }
  if (!s.is_object()) return Unsupported(path, "a schema must be an object or a boolean");
  for (const auto& [key, value] : s.items()) {
    if (!Supported().contains(key) && !Annotations().contains(key)) {
      return Unsupported(path, absl::StrCat("keyword '", key, "' is not supported"));
    }
  }
  if (s.contains("$ref")) {
    for (const auto& [key, value] : s.items()) {
      if (key != "$ref" && Supported().contains(key)) {
        return Unsupported(path, absl::StrCat("'", key, "' next to $ref is not supported"));
      }
    }
    if (!s["$ref"].is_string()) return Unsupported(path, "$ref must be a string");
    return Ref(s["$ref"].get<std::string>(), path, depth);
  }
  if (s.contains("const")) return Const(s["const"]);
  if (s.contains("enum")) {
    const Json& e = s["enum"];
    if (!e.is_array() || e.empty()) return Unsupported(path, "enum must be a non-empty array");
    std::vector<Seq> alts;
    for (const Json& v : e) alts.push_back({B::Ref(Const(v))});
    return b_.Rule("enum", std::move(alts));
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (!s.contains(key)) continue;
    const Json& list = s[key];
    if (!list.is_array() || list.empty()) {
      return Unsupported(path, absl::StrCat(key, " must be a non-empty array"));
    }
    for (const auto& [other, value] : s.items()) {
      if (other != key && Supported().contains(other)) {
        return Unsupported(path, absl::StrCat("'", other, "' next to ", key, " is not supported"));
      }
    }
    if (std::string_view(key) == "allOf") {
      if (list.size() != 1) return Unsupported(path, "allOf of more than one schema");
      return Schema(list[0], absl::StrCat(path, "/allOf/0"), depth + 1);
    }
    std::vector<Seq> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto r = Schema(list[i], absl::StrCat(path, "/", key, "/", i), depth + 1);
      if (!r.ok()) return r.status();
      alts.push_back({B::Ref(*r)});
    }
    return b_.Rule(key, std::move(alts));
  }
  if (!s.contains("type")) {
    // No type: the keywords say which types they constrain; a bare schema allows anything.
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      return ObjectSchema(s, path, depth);
    }
    // A keyword of one type alone constrains that type only; generating that type is a
    // (sound) choice among the values the schema allows.
    for (const char* key : {"items", "prefixItems", "minItems", "maxItems"}) {
      if (s.contains(key)) return Typed(s, "array", path, depth);
    }
    for (const char* key : {"minLength", "maxLength", "format", "pattern"}) {
      if (s.contains(key)) return Typed(s, "string", path, depth);
    }
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(key)) return Typed(s, "integer", path, depth);
    }
    return Value();
  }
  const Json& type = s["type"];
  if (type.is_string()) return Typed(s, type.get<std::string>(), path, depth);
  if (!type.is_array() || type.empty()) {
    return Unsupported(path, "type must be a name or a non-empty list of names");
  }
  std::vector<Seq> alts;
  for (const Json& t : type) {
    if (!t.is_string()) return Unsupported(path, "type must be a name or a list of names");
    auto r = Typed(s, t.get<std::string>(), path, depth);
    if (!r.ok()) return r.status();
    alts.push_back({B::Ref(*r)});
  }
  return b_.Rule("types", std::move(alts));
}

absl::StatusOr<uint32_t> JsonGrammarCompiler::Typed(const Json& s, const std::string& type,
                                                    const std::string& path, int depth) {
  if (type == "object") return ObjectSchema(s, path, depth);
  if (type == "array") {
    auto min = Bound(s, "minItems", path);
    if (!min.ok()) return min.status();
    auto max = Bound(s, "maxItems", path);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < std::max(*min, 0)) return Unsupported(path, "maxItems < minItems");
    if (s.contains("prefixItems")) return TupleSchema(s, std::max(*min, 0), *max, path, depth);
    std::optional<uint32_t> item;
    if (s.contains("items")) {
      auto r = Schema(s["items"], path + "/items", depth + 1);
      if (!r.ok()) return r.status();
      item = *r;
    }
    return Array(item, std::max(*min, 0), *max);
  }
  if (type == "string" && s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Unsupported(path, "pattern must be a string");
    for (const char* key : {"minLength", "maxLength", "format"}) {
      if (s.contains(key)) {
        return Unsupported(path, absl::StrCat(key, " next to pattern is not supported"));
      }
    }
    auto body = AddRegexRule(s["pattern"].get<std::string>(), RegexText::kJsonString, &b_);
    if (!body.ok()) return Unsupported(path, absl::StrCat("pattern: ", body.status().message()));
    return b_.Rule("patterned", {{B::Byte('"'), B::Ref(*body), B::Byte('"')}});
  }
  if (type == "string" && s.contains("format")) {
    if (!s["format"].is_string()) return Unsupported(path, "format must be a string");
    if (s.contains("minLength") || s.contains("maxLength")) {
      return Unsupported(path, "minLength/maxLength next to format is not supported");
    }
    const std::string format = s["format"].get<std::string>();
    std::optional<uint32_t> body = Format(format);
    if (!body) {
      return Unsupported(path, absl::StrCat("format '", format,
                                            "' is not supported (date, time, date-time, uuid, "
                                            "ipv4 and email are)"));
    }
    return b_.Rule("formatted", {{B::Byte('"'), B::Ref(*body), B::Byte('"')}});
  }
  if (type == "string") {
    auto min = Bound(s, "minLength", path);
    if (!min.ok()) return min.status();
    auto max = Bound(s, "maxLength", path);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < std::max(*min, 0)) return Unsupported(path, "maxLength < minLength");
    return String(std::max(*min, 0), *max);
  }
  const bool bounded = s.contains("minimum") || s.contains("maximum") ||
                       s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum");
  if (type == "integer") {
    if (!bounded) return numbers_.Integer();
    std::optional<int64_t> lo, hi;
    for (const std::string key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      // Within int64 with room to round: |v| < 2^62.
      if (!v.is_number() || !(std::fabs(v.get<double>()) < 4.6e18)) {
        return Unsupported(path, absl::StrCat(key, " must be a number of magnitude below 2^62"));
      }
      const bool lower = key == "minimum" || key == "exclusiveMinimum";
      const bool exclusive = key[0] == 'e';
      int64_t bound;
      if (v.is_number_integer()) {
        bound = v.get<int64_t>() + (exclusive ? (lower ? 1 : -1) : 0);
      } else {
        const double d = v.get<double>();
        bound = static_cast<int64_t>(lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d))
                                           : (exclusive ? std::ceil(d) - 1 : std::floor(d)));
      }
      std::optional<int64_t>& side = lower ? lo : hi;
      side = side ? (lower ? std::max(*side, bound) : std::min(*side, bound)) : bound;
    }
    if (lo && hi && *lo > *hi) return Unsupported(path, "no integer lies within the bounds");
    return numbers_.IntegerRange(lo, hi);
  }
  if (type == "number") {
    if (!bounded) return numbers_.Number();
    std::optional<JsonNumberRules::NumberBound> lo, hi;
    for (const std::string key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      if (!v.is_number() || !(std::fabs(v.get<double>()) < 4.6e18) ||
          v.get<double>() != std::floor(v.get<double>())) {
        return Unsupported(path, absl::StrCat(key,
                                              " on a number must be a whole number of magnitude "
                                              "below 2^62 (fractional bounds are not supported)"));
      }
      const int64_t value =
          v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
      const bool lower = key == "minimum" || key == "exclusiveMinimum";
      const bool exclusive = key[0] == 'e';
      // The tighter bound of two on one side; at a tie, the exclusive one.
      std::optional<JsonNumberRules::NumberBound>& side = lower ? lo : hi;
      if (!side || (lower ? value > side->value : value < side->value) ||
          (value == side->value && exclusive)) {
        side = JsonNumberRules::NumberBound{value, exclusive};
      }
    }
    std::optional<uint32_t> range = numbers_.NumberRange(lo, hi);
    if (!range) return Unsupported(path, "no number lies within the bounds");
    return *range;
  }
  if (type == "boolean") return b_.Rule("boolean", {B::Literal("true"), B::Literal("false")});
  if (type == "null") return Literal("null");
  return Unsupported(path, absl::StrCat("unknown type '", type, "'"));
}

absl::StatusOr<uint32_t> JsonGrammarCompiler::TupleSchema(const Json& s, int min, int max,
                                                          const std::string& path, int depth) {
  const Json& prefix = s["prefixItems"];
  if (!prefix.is_array() || prefix.empty() || prefix.size() > static_cast<size_t>(kMaxJsonRepeat)) {
    return Unsupported(
        path, absl::StrCat("prefixItems must be a list of 1 to ", kMaxJsonRepeat, " schemas"));
  }
  const int n = static_cast<int>(prefix.size());
  std::vector<uint32_t> positions;
  for (int k = 0; k < n; ++k) {
    auto r = Schema(prefix[k], absl::StrCat(path, "/prefixItems/", k), depth + 1);
    if (!r.ok()) return r.status();
    positions.push_back(*r);
  }
  // Items after the prefix: under `items` (any value when absent; none when false).
  std::optional<uint32_t> rest;
  if (!s.contains("items")) {
    rest = Value();
  } else if (!(s["items"].is_boolean() && !s["items"].get<bool>())) {
    auto r = Schema(s["items"], path + "/items", depth + 1);
    if (!r.ok()) return r.status();
    rest = *r;
  } else {
    max = max < 0 ? n : std::min(max, n);
  }
  if (max >= 0 && min > max)
    return Unsupported(path, "no array fits prefixItems, items and minItems");
  const Seq comma = {B::Byte(','), B::Ref(Ws())};
  // after[k]: what may follow once k items are out; built from the last back.
  uint32_t next;
  if (rest && (max < 0 || max > n)) {
    const uint32_t more = b_.Rule("next element", {Cat({comma, {B::Ref(*rest), B::Ref(Ws())}})});
    next = numbers_.Repeat(more, std::max(min - n, 0), max < 0 ? -1 : max - n, {});
  } else {
    next = b_.Rule("tuple end", {{}});
  }
  for (int k = std::min(n, max < 0 ? n : max) - 1; k >= 0; --k) {
    std::vector<Seq> alts;
    if (k >= min) alts.push_back({});
    alts.push_back(
        Cat({k > 0 ? comma : Seq{}, {B::Ref(positions[k]), B::Ref(Ws()), B::Ref(next)}}));
    next = b_.Rule("tuple", std::move(alts));
  }
  return b_.Rule("tuple", {{B::Byte('['), B::Ref(Ws()), B::Ref(next), B::Byte(']')}});
}

absl::StatusOr<uint32_t> JsonGrammarCompiler::ObjectSchema(const Json& s, const std::string& path,
                                                           int depth) {
  const Json* props = s.contains("properties") ? &s["properties"] : nullptr;
  if (props != nullptr && !props->is_object())
    return Unsupported(path, "properties: not an object");
  absl::flat_hash_set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Unsupported(path, "required: not an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) return Unsupported(path, "required: not a list of names");
      if (props == nullptr || !props->contains(r.get<std::string>())) {
        return Unsupported(path, absl::StrCat("required property '", r.get<std::string>(),
                                              "' is not in properties"));
      }
      required.insert(r.get<std::string>());
    }
  }
  std::optional<uint32_t> extra;  // additionalProperties' schema; nullopt: none allowed
  if (s.contains("additionalProperties")) {
    const Json& a = s["additionalProperties"];
    if (!(a.is_boolean() && !a.get<bool>())) {
      if (props != nullptr && !props->empty()) {
        return Unsupported(path, "additionalProperties next to properties is not supported");
      }
      auto r = Schema(a, path + "/additionalProperties", depth + 1);
      if (!r.ok()) return r.status();
      extra = *r;
    }
  } else if (props == nullptr) {
    extra = Value();  // {"type": "object"}: any object
  }
  if (extra) return Object(*extra);
  if (props == nullptr || props->empty()) return Literal("{}");

  // first[i] / rest[i]: properties i.. when none / some property was written before.
  const size_t n = props->size();
  std::vector<uint32_t> members;
  std::vector<std::string> keys;
  for (const auto& [key, sub] : props->items()) {
    keys.push_back(key);
    auto r = Schema(sub, absl::StrCat(path, "/properties/", key), depth + 1);
    if (!r.ok()) return r.status();
    members.push_back(b_.Rule(absl::StrCat("property ", key), {Cat({B::Literal(Json(key).dump()),
                                                                    {B::Ref(Ws())},
                                                                    B::Literal(":"),
                                                                    {B::Ref(Ws())},
                                                                    {B::Ref(*r), B::Ref(Ws())}})}));
  }
  uint32_t first = b_.Rule("properties_end", {{}});
  uint32_t rest = first;
  for (size_t i = n; i-- > 0;) {
    const bool optional = !required.contains(keys[i]);
    std::vector<Seq> first_alts = {{B::Ref(members[i]), B::Ref(rest)}};
    std::vector<Seq> rest_alts = {{B::Byte(','), B::Ref(Ws()), B::Ref(members[i]), B::Ref(rest)}};
    if (optional) {
      first_alts.push_back({B::Ref(first)});
      rest_alts.push_back({B::Ref(rest)});
    }
    const uint32_t new_first = b_.Rule("properties", std::move(first_alts));
    rest = b_.Rule("properties", std::move(rest_alts));
    first = new_first;
  }
  return b_.Rule("object", {{B::Byte('{'), B::Ref(Ws()), B::Ref(first), B::Byte('}')}});
}

absl::StatusOr<uint32_t> JsonGrammarCompiler::Ref(const std::string& ref, const std::string& path,
                                                  int depth) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  const Json* target = nullptr;
  if (ref == "#") {
    target = root_;
  } else {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string_view p(prefix);
      if (ref.compare(0, p.size(), p) != 0) continue;
      const std::string name = ref.substr(p.size());
      const std::string defs(p.substr(2, p.size() - 3));
      if (root_->contains(defs) && (*root_)[defs].is_object() && (*root_)[defs].contains(name)) {
        target = &(*root_)[defs][name];
      }
    }
  }
  if (target == nullptr) {
    return Unsupported(path, absl::StrCat("$ref '", ref,
                                          "' does not name \"#\" or an entry of $defs or "
                                          "definitions"));
  }
  const uint32_t rule = b_.NewRule(absl::StrCat("$ref ", ref));
  refs_[ref] = rule;
  auto body = Schema(*target, ref.substr(1), depth + 1);
  if (!body.ok()) return body.status();
  b_.AddAlternative(rule, {B::Ref(*body)});
  return rule;
}

}  // namespace

absl::StatusOr<Grammar> JsonObjectGrammar() {
  JsonGrammarCompiler c;
  const uint32_t root = c.Object(std::nullopt);
  return std::move(c.builder()).Build(root);
}

absl::StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema) {
  auto json = ParseStrictJson(schema, StrictJsonOptions{.max_depth = 2 * kMaxSchemaDepth});
  if (!json.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON schema: not valid JSON: ", json.status().message()));
  }
  JsonGrammarCompiler c;
  c.SetRoot(&*json);
  auto root = c.Schema(*json, "", 0);
  if (!root.ok()) return root.status();
  // The root rule as a $ref "#" target too, when the schema refers to itself.
  return std::move(c.builder()).Build(*root);
}

absl::StatusOr<Grammar> ChoiceGrammar(absl::Span<const std::string> choices) {
  if (choices.empty()) return absl::InvalidArgumentError("choice: no choices");
  GrammarBuilder b;
  std::vector<GrammarBuilder::Sequence> alts;
  for (const std::string& c : choices) alts.push_back(GrammarBuilder::Literal(c));
  const uint32_t root = b.Rule("choice", std::move(alts));
  return std::move(b).Build(root);
}

}  // namespace pagellm::structured
