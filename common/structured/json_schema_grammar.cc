// A JSON Schema is compiled top-down into one rule per schema node; $ref targets get one rule
// each, created before their body so that recursive schemas refer to themselves. The JSON
// building blocks (whitespace, strings, numbers, any value) are made once per grammar, on first
// use.
#include "common/structured/json_schema_grammar.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/json/strict_json.h"
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

Seq Cat(std::initializer_list<Seq> parts) {
  Seq out;
  for (const Seq& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class JsonGrammarCompiler {
 public:
  // Any JSON value; objects, arrays, strings, numbers as JSON allows.
  uint32_t Value() {
    if (value_) return *value_;
    value_ = b_.NewRule("value");
    for (uint32_t r : {Object(std::nullopt), Array(std::nullopt, 0, -1), String(0, -1), Number(),
                       Literal("true"), Literal("false"), Literal("null")}) {
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
    const uint32_t s = b_.Rule(
        "string",
        {Cat({B::Literal("\""), {B::Ref(Repeat(Char(), min, max, {}))}, B::Literal("\"")})});
    if (min == 0 && max < 0) string_ = s;
    return s;
  }

  uint32_t Integer() {
    if (integer_) return *integer_;
    const uint32_t more = Digits(0, kMaxIntegerDigits - 1);
    const uint32_t uint =
        b_.Rule("uint", {B::Literal("0"), {B::Bytes(ByteSet::Range('1', '9')), B::Ref(more)}});
    integer_ = b_.Rule("integer", {{B::Ref(uint)}, {B::Byte('-'), B::Ref(uint)}});
    return *integer_;
  }

  uint32_t Number() {
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

  // min..max decimal digits.
  uint32_t Digits(int min, int max) {
    return Repeat(b_.Rule("digit", {{B::Bytes(ByteSet::Range('0', '9'))}}), min, max, {});
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

  // min..max (-1: unbounded) copies of `item`, `sep` between them.
  uint32_t Repeat(uint32_t item, int min, int max, const Seq& sep) {
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

  // open ws [item ("," ws item)*] close, with min..max items; `item` ends with its own ws.
  uint32_t Delimited(std::string name, char open, uint32_t item, char close, int min, int max) {
    const Seq comma = {B::Byte(','), B::Ref(Ws())};
    const uint32_t items = Repeat(item, min, max, comma);
    return b_.Rule(std::move(name), {{B::Byte(static_cast<uint8_t>(open)), B::Ref(Ws()),
                                      B::Ref(items), B::Byte(static_cast<uint8_t>(close))}});
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

  GrammarBuilder b_;
  const Json* root_ = nullptr;
  std::optional<uint32_t> value_, string_, integer_, number_, ws_, char_;
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
  static const auto* kSet = new absl::flat_hash_set<std::string_view>{
      "type",      "properties", "required", "additionalProperties",
      "items",     "minItems",   "maxItems", "minLength",
      "maxLength", "enum",       "const",    "anyOf",
      "oneOf",     "allOf",      "$ref"};
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
    if (s.contains("items")) return Typed(s, "array", path, depth);
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
    std::optional<uint32_t> item;
    if (s.contains("items")) {
      auto r = Schema(s["items"], path + "/items", depth + 1);
      if (!r.ok()) return r.status();
      item = *r;
    }
    return Array(item, std::max(*min, 0), *max);
  }
  if (type == "string") {
    auto min = Bound(s, "minLength", path);
    if (!min.ok()) return min.status();
    auto max = Bound(s, "maxLength", path);
    if (!max.ok()) return max.status();
    if (*max >= 0 && *max < std::max(*min, 0)) return Unsupported(path, "maxLength < minLength");
    return String(std::max(*min, 0), *max);
  }
  if (type == "integer") return Integer();
  if (type == "number") return Number();
  if (type == "boolean") return b_.Rule("boolean", {B::Literal("true"), B::Literal("false")});
  if (type == "null") return Literal("null");
  return Unsupported(path, absl::StrCat("unknown type '", type, "'"));
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
