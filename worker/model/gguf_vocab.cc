#include "worker/model/gguf_vocab.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer/pre_tokenizer.h"

namespace pagellm {
namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string Key(std::string_view name) { return absl::StrCat(Sv(kPrefix), Sv(name)); }

absl::Status Invalid(std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Key(name), ": ", Sv(what)));
}

// The array under `name`, nullptr when absent; InvalidArgument when not an array.
absl::StatusOr<const std::vector<GgufValue>*> FindArray(const GgufFile& gguf,
                                                        std::string_view name) {
  const GgufValue* v = gguf.Find(Key(name));
  if (v == nullptr) return nullptr;
  const std::vector<GgufValue>* a = v->AsArray();
  if (a == nullptr) return Invalid(name, "not an array");
  return a;
}

absl::StatusOr<std::vector<std::string>> ReadStrings(const GgufFile& gguf, std::string_view name) {
  ASSIGN_OR_RETURN(const std::vector<GgufValue>* a, FindArray(gguf, name));
  std::vector<std::string> out;
  if (a == nullptr) return out;
  out.reserve(a->size());
  for (const GgufValue& e : *a) {
    auto s = e.AsString();
    if (!s.ok()) return Invalid(name, "an element is not a string");
    out.emplace_back(*s);
  }
  return out;
}

// -1 when absent.
absl::StatusOr<int32_t> ReadId(const GgufFile& gguf, std::string_view name) {
  const GgufValue* v = gguf.Find(Key(name));
  if (v == nullptr) return -1;
  auto id = v->AsInt();
  if (!id.ok()) return Invalid(name, "not an integer");
  if (*id == UINT32_MAX) return -1;  // the uint32 spelling of "none" (LLAMA_TOKEN_NULL)
  // Out-of-range ids are reported by Tokenizer::Create; only keep them representable here.
  if (*id < -1 || *id > INT32_MAX) return Invalid(name, absl::StrCat(*id, " is out of range"));
  return static_cast<int32_t>(*id);
}

absl::StatusOr<bool> ReadBool(const GgufFile& gguf, std::string_view name, bool fallback) {
  const GgufValue* v = gguf.Find(Key(name));
  if (v == nullptr) return fallback;
  auto b = v->AsBool();
  if (!b.ok()) return Invalid(name, "not a bool");
  return *b;
}

}  // namespace

absl::StatusOr<VocabSpec> VocabFromGguf(const GgufFile& gguf) {
  VocabSpec spec;
  const GgufValue* model_v = gguf.Find(Key("model"));
  if (model_v == nullptr) return absl::NotFoundError(Key("model") + " is missing");
  auto model = model_v->AsString();
  if (!model.ok()) return Invalid("model", "not a string");
  const bool spm = *model == "llama";
  if (*model == "gpt2") {
    spec.model = VocabModel::kByteLevelBpe;
  } else if (spm) {
    spec.model = VocabModel::kSentencePieceBpe;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("unsupported tokenizer model \"", Sv(*model), "\""));
  }

  if (const GgufValue* pre = gguf.Find(Key("pre"))) {
    auto name = pre->AsString();
    if (!name.ok()) return Invalid("pre", "not a string");
    spec.pre = std::string(*name);
  }
  PreTokenizerDefaults defaults;
  if (!spm) {
    ASSIGN_OR_RETURN(defaults, PreTokenizerDefaultsFor(spec.pre));
  }

  ASSIGN_OR_RETURN(spec.tokens, ReadStrings(gguf, "tokens"));
  if (spec.tokens.empty()) return absl::NotFoundError(Key("tokens") + " is missing or empty");
  const size_t n = spec.tokens.size();

  ASSIGN_OR_RETURN(const std::vector<GgufValue>* scores, FindArray(gguf, "scores"));
  if (scores != nullptr) {
    if (scores->size() != n) return Invalid("scores", "length differs from tokens");
    spec.scores.reserve(n);
    for (const GgufValue& e : *scores) {
      auto f = e.AsFloat();
      if (!f.ok()) return Invalid("scores", "an element is not a number");
      spec.scores.push_back(static_cast<float>(*f));
    }
  }
  ASSIGN_OR_RETURN(const std::vector<GgufValue>* types, FindArray(gguf, "token_type"));
  if (types != nullptr) {
    if (types->size() != n) return Invalid("token_type", "length differs from tokens");
    spec.token_types.reserve(n);
    for (const GgufValue& e : *types) {
      auto t = e.AsInt();
      if (!t.ok() || *t < 1 || *t > 6) return Invalid("token_type", "an element is not 1..6");
      spec.token_types.push_back(static_cast<TokenType>(*t));
    }
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> merges, ReadStrings(gguf, "merges"));
  spec.merges.reserve(merges.size());
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ', 1);  // a token may itself start with a space
    if (sp == std::string::npos) return Invalid("merges", "a merge has no space");
    spec.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  if (!spm && spec.merges.empty()) return Invalid("merges", "missing for a gpt2 vocabulary");

  ASSIGN_OR_RETURN(spec.bos_id, ReadId(gguf, "bos_token_id"));
  ASSIGN_OR_RETURN(spec.eos_id, ReadId(gguf, "eos_token_id"));
  ASSIGN_OR_RETURN(spec.unk_id, ReadId(gguf, "unknown_token_id"));
  ASSIGN_OR_RETURN(spec.pad_id, ReadId(gguf, "padding_token_id"));
  ASSIGN_OR_RETURN(spec.eot_id, ReadId(gguf, "eot_token_id"));
  ASSIGN_OR_RETURN(spec.eom_id, ReadId(gguf, "eom_token_id"));
  ASSIGN_OR_RETURN(spec.add_bos, ReadBool(gguf, "add_bos_token", spm || defaults.add_bos));
  ASSIGN_OR_RETURN(spec.add_eos, ReadBool(gguf, "add_eos_token", false));
  ASSIGN_OR_RETURN(spec.add_space_prefix, ReadBool(gguf, "add_space_prefix", spm));
  if (!spm) spec.add_space_prefix = false;
  spec.ignore_merges = defaults.ignore_merges;
  return spec;
}

}  // namespace pagellm
