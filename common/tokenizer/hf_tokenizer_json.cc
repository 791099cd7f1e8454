// tokenizer.json -> VocabSpec. The JSON is untrusted: every field's type is checked before use
// and ids are bounded before anything is allocated from them.
#include "common/tokenizer/hf_tokenizer_json.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tokenizer/absl_view.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", AbslView(what)));
}
absl::Status Unsupported(std::string_view what) {
  return absl::UnimplementedError(absl::StrCat("tokenizer.json: unsupported ", AbslView(what)));
}

// The member `key` of object `j`; nullptr when absent or null.
const Json* Get(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string GetString(const Json& j, const char* key, std::string fallback = "") {
  const Json* v = Get(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : fallback;
}

bool GetBool(const Json& j, const char* key, bool fallback) {
  const Json* v = Get(j, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

std::string TypeOf(const Json& j) { return GetString(j, "type", "(no type)"); }

bool IsSpmReplace(const Json& j) {
  const Json* pattern = Get(j, "pattern");
  return TypeOf(j) == "Replace" && pattern != nullptr &&
         GetString(*pattern, "String", "\x01") == " " && GetString(j, "content") == kSpmSpace;
}

// Byte-level pre-tokenizer steps -> regexes.
absl::Status ParseByteLevelPre(const Json* pre, VocabSpec* spec) {
  if (pre == nullptr) return Unsupported("byte-level BPE without a pre_tokenizer");
  std::vector<const Json*> steps;
  if (TypeOf(*pre) == "Sequence") {
    const Json* list = Get(*pre, "pretokenizers");
    if (list == nullptr || !list->is_array()) return Invalid("Sequence without pretokenizers");
    for (const Json& step : *list) steps.push_back(&step);
  } else {
    steps.push_back(pre);
  }
  bool byte_level = false;
  for (const Json* step : steps) {
    const std::string type = TypeOf(*step);
    if (byte_level) return Unsupported(absl::StrCat("pre_tokenizer step after ByteLevel"));
    if (type == "Split") {
      const Json* pattern = Get(*step, "pattern");
      const Json* regex = pattern == nullptr ? nullptr : Get(*pattern, "Regex");
      if (regex == nullptr || !regex->is_string()) return Unsupported("Split without a Regex");
      if (GetString(*step, "behavior") != "Isolated" || GetBool(*step, "invert", false)) {
        return Unsupported("Split behavior other than Isolated");
      }
      spec->pre_patterns.push_back(regex->get<std::string>());
    } else if (type == "Digits") {
      spec->pre_patterns.push_back(GetBool(*step, "individual_digits", false) ? "\\p{N}"
                                                                              : "\\p{N}+");
    } else if (type == "ByteLevel") {
      if (GetBool(*step, "add_prefix_space", true)) {
        return Unsupported("ByteLevel with add_prefix_space");
      }
      if (GetBool(*step, "use_regex", true)) {
        spec->pre_patterns.emplace_back(Gpt2PreTokenizerRegex());
      }
      byte_level = true;
    } else {
      return Unsupported(absl::StrCat("pre_tokenizer ", type));
    }
  }
  if (!byte_level) return Unsupported("byte-level BPE without a ByteLevel pre_tokenizer");
  if (spec->pre_patterns.empty()) return Unsupported("ByteLevel without any regex");
  spec->pre = "tokenizer.json";
  return absl::OkStatus();
}

// SentencePiece-style normalizer / Metaspace -> space prefix flags.
absl::Status ParseSpmSpaces(const Json* normalizer, const Json* pre, VocabSpec* spec) {
  if (normalizer != nullptr) {
    if (pre != nullptr) return Unsupported(absl::StrCat("pre_tokenizer ", TypeOf(*pre)));
    if (IsSpmReplace(*normalizer)) {
      spec->add_space_prefix = false;
      return absl::OkStatus();
    }
    const Json* list = Get(*normalizer, "normalizers");
    if (TypeOf(*normalizer) == "Sequence" && list != nullptr && list->is_array() &&
        list->size() == 2 && TypeOf((*list)[0]) == "Prepend" &&
        GetString((*list)[0], "prepend") == kSpmSpace && IsSpmReplace((*list)[1])) {
      spec->add_space_prefix = true;
      return absl::OkStatus();
    }
    return Unsupported(absl::StrCat("normalizer ", TypeOf(*normalizer)));
  }
  if (pre == nullptr || TypeOf(*pre) != "Metaspace") {
    return Unsupported("byte-fallback BPE without a Metaspace pre_tokenizer or normalizer");
  }
  if (GetString(*pre, "replacement") != kSpmSpace) return Unsupported("Metaspace replacement");
  if (GetBool(*pre, "split", true)) return Unsupported("Metaspace with split");
  std::string scheme = GetString(*pre, "prepend_scheme");
  if (scheme.empty()) scheme = GetBool(*pre, "add_prefix_space", true) ? "always" : "never";
  if (scheme != "always" && scheme != "first" && scheme != "never") {
    return Unsupported(absl::StrCat("Metaspace prepend_scheme ", scheme));
  }
  spec->add_space_prefix = scheme != "never";
  spec->space_prefix_first_only = scheme == "first";
  return absl::OkStatus();
}

absl::StatusOr<int32_t> TokenId(const Json& j, std::string_view what) {
  if (!j.is_number_integer()) return Invalid(absl::StrCat(AbslView(what), " is not an integer"));
  const int64_t id = j.get<int64_t>();
  if (id < 0 || id > kMaxTokenId) {
    return Invalid(absl::StrCat(AbslView(what), " ", id, " is out of range"));
  }
  return static_cast<int32_t>(id);
}

absl::Status ParsePostProcessor(const Json* pp, VocabSpec* spec) {
  if (pp == nullptr) return absl::OkStatus();
  const std::string type = TypeOf(*pp);
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    const Json* list = Get(*pp, "processors");
    if (list == nullptr || !list->is_array()) return Invalid("Sequence without processors");
    for (const Json& p : *list) RETURN_IF_ERROR(ParsePostProcessor(&p, spec));
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") return Unsupported(absl::StrCat("post_processor ", type));
  const Json* single = Get(*pp, "single");
  const Json* specials = Get(*pp, "special_tokens");
  if (single == nullptr || !single->is_array()) return Invalid("TemplateProcessing.single");
  bool seen_a = false;
  for (const Json& item : *single) {
    if (Get(item, "Sequence") != nullptr) {
      seen_a = true;
      continue;
    }
    const Json* st = Get(item, "SpecialToken");
    if (st == nullptr) return Invalid("TemplateProcessing item");
    const std::string name = GetString(*st, "id");
    const Json* entry = specials == nullptr ? nullptr : Get(*specials, name.c_str());
    const Json* ids = entry == nullptr ? nullptr : Get(*entry, "ids");
    if (ids == nullptr || !ids->is_array() || ids->size() != 1) {
      return Unsupported(absl::StrCat("TemplateProcessing special token ", name));
    }
    ASSIGN_OR_RETURN(const int32_t id, TokenId((*ids)[0], "special token id"));
    int32_t& slot = seen_a ? spec->eos_id : spec->bos_id;
    bool& flag = seen_a ? spec->add_eos : spec->add_bos;
    if (flag) return Unsupported("TemplateProcessing with two special tokens on one side");
    slot = id;
    flag = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<VocabSpec> Parse(const Json& root) {
  if (!root.is_object()) return Invalid("not a JSON object");
  const Json* model = Get(root, "model");
  if (model == nullptr || !model->is_object()) return Invalid("no model");
  if (TypeOf(*model) != "BPE") return Unsupported(absl::StrCat("model ", TypeOf(*model)));
  if (const Json* d = Get(*model, "dropout");
      d != nullptr && d->is_number() && d->get<double>() > 0) {
    return Unsupported("BPE dropout");
  }
  if (!GetString(*model, "continuing_subword_prefix").empty() ||
      !GetString(*model, "end_of_word_suffix").empty()) {
    return Unsupported("continuing_subword_prefix / end_of_word_suffix");
  }
  VocabSpec spec;
  const bool byte_fallback = GetBool(*model, "byte_fallback", false);
  spec.model = byte_fallback ? VocabModel::kSentencePieceBpe : VocabModel::kByteLevelBpe;
  spec.ignore_merges = GetBool(*model, "ignore_merges", false);

  // Vocabulary and added tokens.
  const Json* vocab = Get(*model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return Invalid("model.vocab is not an object");
  std::vector<std::pair<int32_t, std::string>> entries;
  std::vector<std::pair<int32_t, TokenType>> added_types;
  int32_t max_id = -1;
  for (const auto& [text, id_json] : vocab->items()) {
    ASSIGN_OR_RETURN(const int32_t id, TokenId(id_json, "vocab id"));
    entries.emplace_back(id, text);
    max_id = std::max(max_id, id);
  }
  const std::string unk_token = GetString(*model, "unk_token");
  if (const Json* added = Get(root, "added_tokens")) {
    if (!added->is_array()) return Invalid("added_tokens is not an array");
    for (const Json& a : *added) {
      const Json* id_json = Get(a, "id");
      const Json* content = Get(a, "content");
      if (id_json == nullptr || content == nullptr || !content->is_string()) {
        return Invalid("added token without id or content");
      }
      ASSIGN_OR_RETURN(const int32_t id, TokenId(*id_json, "added token id"));
      if (GetBool(a, "single_word", false)) return Unsupported("added token with single_word");
      const std::string text = content->get<std::string>();
      const bool special = GetBool(a, "special", false);
      entries.emplace_back(id, text);
      added_types.emplace_back(id, !special            ? TokenType::kUserDefined
                                   : text == unk_token ? TokenType::kUnknown
                                                       : TokenType::kControl);
      if (GetBool(a, "lstrip", false)) spec.lstrip_ids.push_back(id);
      if (GetBool(a, "rstrip", false)) spec.rstrip_ids.push_back(id);
      max_id = std::max(max_id, id);
    }
  }
  if (max_id < 0) return Invalid("empty vocabulary");
  const size_t n = static_cast<size_t>(max_id) + 1;
  // Ids with no token become unused slots; a hostile file could name one id near the limit and
  // make us allocate millions of them. Real vocabularies leave few gaps.
  if (n > 2 * entries.size() + 1024) {
    return Invalid(absl::StrCat("token ids run to ", max_id, " but only ", entries.size(),
                                " tokens are defined"));
  }
  spec.tokens.resize(n);
  spec.token_types.assign(n, TokenType::kUnused);
  std::vector<bool> filled(n);
  for (auto& [id, text] : entries) {
    if (filled[id]) {
      if (spec.tokens[id] != text) {
        return Invalid(absl::StrCat("id ", id, " names two different tokens"));
      }
      continue;
    }
    filled[id] = true;
    spec.tokens[id] = std::move(text);
    spec.token_types[id] = TokenType::kNormal;
  }
  size_t unused = 0;
  for (size_t i = 0; i < n; ++i) unused += !filled[i];
  if (unused > 0) PLOG_WARN("tokenizer.json: {} ids have no token; they decode to nothing", unused);
  for (const auto& [id, type] : added_types) spec.token_types[id] = type;
  if (byte_fallback) {
    for (size_t i = 0; i < n; ++i) {
      const std::string& t = spec.tokens[i];
      if (spec.token_types[i] == TokenType::kNormal && t.size() == 6 && t.rfind("<0x", 0) == 0 &&
          t[5] == '>') {
        spec.token_types[i] = TokenType::kByte;
      }
    }
  }
  for (size_t i = 0; i < n && !unk_token.empty(); ++i) {
    if (filled[i] && spec.tokens[i] == unk_token) {
      spec.unk_id = static_cast<int32_t>(i);
      if (spec.token_types[i] == TokenType::kControl) spec.token_types[i] = TokenType::kUnknown;
      break;
    }
  }

  // Merges.
  if (const Json* merges = Get(*model, "merges")) {
    if (!merges->is_array()) return Invalid("model.merges is not an array");
    spec.merges.reserve(merges->size());
    for (const Json& m : *merges) {
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          return Invalid(absl::StrCat("merge \"", s, "\" is not two tokens"));
        }
        spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return Invalid("a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }

  // Text handling.
  const Json* normalizer = Get(root, "normalizer");
  const Json* pre = Get(root, "pre_tokenizer");
  if (byte_fallback) {
    RETURN_IF_ERROR(ParseSpmSpaces(normalizer, pre, &spec));
  } else {
    if (normalizer != nullptr) {
      if (TypeOf(*normalizer) != "NFC") {
        return Unsupported(absl::StrCat("normalizer ", TypeOf(*normalizer)));
      }
      PLOG_WARN("tokenizer.json: NFC normalizer not applied; input is assumed to be NFC");
    }
    RETURN_IF_ERROR(ParseByteLevelPre(pre, &spec));
  }
  RETURN_IF_ERROR(ParsePostProcessor(Get(root, "post_processor"), &spec));

  // bos / eos by name when the post-processor does not say.
  auto find = [&](std::initializer_list<std::string_view> names) -> int32_t {
    for (std::string_view name : names) {
      for (size_t i = 0; i < n; ++i) {
        if (spec.token_types[i] == TokenType::kControl && spec.tokens[i] == name) {
          return static_cast<int32_t>(i);
        }
      }
    }
    return -1;
  };
  if (spec.bos_id < 0) spec.bos_id = find({"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"});
  if (spec.eos_id < 0) {
    spec.eos_id = find({"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>"});
  }
  return spec;
}

}  // namespace

absl::StatusOr<VocabSpec> VocabSpecFromHfTokenizerJson(std::string_view json) {
  const Json root = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Invalid("not valid JSON");
  try {
    return Parse(root);
  } catch (const Json::exception& e) {  // a type mismatch the checks above missed
    return Invalid(e.what());
  }
}

}  // namespace pagellm
