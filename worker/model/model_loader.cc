#include "worker/model/model_loader.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tokenizer/hf_tokenizer_json.h"
#include "nlohmann/json.hpp"
#include "worker/model/gguf_file.h"
#include "worker/model/gguf_vocab.h"
#include "worker/model/hf_checkpoint.h"
#include "worker/model/hf_eos.h"

namespace pagellm {
namespace {

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

bool IsJsonPath(const std::string& path) {
  return path.size() >= 5 && path.substr(path.size() - 5) == ".json";
}

// Adds the model's end-of-generation ids (hf_eos.h) to `spec`, leaving out, with a warning, any
// the vocabulary lacks (a model's files may name ids its tokenizer does not have).
void AddEndOfGenerationIds(std::span<const int32_t> ids, VocabSpec* spec) {
  for (int32_t id : ids) {
    if (id < static_cast<int64_t>(spec->tokens.size())) {
      spec->eog_ids.push_back(id);
    } else {
      PLOG_WARN("eos_token_id {} is outside the tokenizer's {} tokens: ignored", id,
                spec->tokens.size());
    }
  }
}

// A tokenizer from a GGUF file or a tokenizer.json, which also ends generation at `eos_ids`.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path,
                                                         std::span<const int32_t> eos_ids = {}) {
  VocabSpec spec;
  if (IsJsonPath(path)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream ss;
    ss << in.rdbuf();
    ASSIGN_OR_RETURN(spec, VocabSpecFromHfTokenizerJson(ss.str()));
  } else {
    ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(path));
    ASSIGN_OR_RETURN(spec, VocabFromGguf(*gguf));
  }
  AddEndOfGenerationIds(eos_ids, &spec);
  return Tokenizer::Create(std::move(spec));
}

// The chat template of a GGUF file ("" when absent or not a string).
std::string GgufChatTemplate(const GgufFile& f) {
  absl::StatusOr<std::string_view> t = f.GetString("tokenizer.chat_template");
  return t.ok() ? std::string(*t) : std::string();
}

// Model files are hostile input: the most of a side file (template, JSON) that is read.
constexpr uintmax_t kMaxSideFileBytes = 64 << 20;

// The file `name` in `dir`; nullopt when absent, unreadable or past kMaxSideFileBytes.
std::optional<std::string> ReadSideFile(const std::string& dir, const char* name) {
  const std::filesystem::path path = std::filesystem::path(dir) / name;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxSideFileBytes) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string out(static_cast<size_t>(size), '\0');
  in.read(out.data(), static_cast<std::streamsize>(size));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

nlohmann::json ReadJsonSideFile(const std::string& dir, const char* name) {
  std::optional<std::string> text = ReadSideFile(dir, name);
  if (!text.has_value()) return nlohmann::json();
  return nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
}

// The chat template next to an HF tokenizer ("" when none): chat_template.jinja, else
// tokenizer_config.json's chat_template, a string or a list of {name, template} of which
// "default" is the chat template.
std::string HfChatTemplate(const std::string& dir) {
  if (std::optional<std::string> jinja = ReadSideFile(dir, "chat_template.jinja")) return *jinja;
  nlohmann::json j = ReadJsonSideFile(dir, "tokenizer_config.json");
  if (!j.is_object() || !j.contains("chat_template")) return "";
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& e : t) {
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
          e["template"].is_string()) {
        return e["template"].get<std::string>();
      }
    }
  }
  return "";
}

// A special token in tokenizer_config.json / special_tokens_map.json: a string, or an
// AddedToken object {"content": ...}; nullopt when absent or neither.
std::optional<std::string> HfTokenText(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  const nlohmann::json& t = j[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) {
    return t["content"].get<std::string>();
  }
  return std::nullopt;
}

// The special tokens of an HF tokenizer as transformers loads them: tokenizer_config.json's;
// a config without "added_tokens_decoder" is the legacy layout, where special_tokens_map.json's
// entries override the config's.
SpecialTokenTexts HfSpecialTokens(const std::string& dir) {
  const nlohmann::json config = ReadJsonSideFile(dir, "tokenizer_config.json");
  const bool legacy = !(config.is_object() && config.contains("added_tokens_decoder"));
  const nlohmann::json map =
      legacy ? ReadJsonSideFile(dir, "special_tokens_map.json") : nlohmann::json();
  auto text = [&](const char* key) {
    return HfTokenText(map, key).value_or(HfTokenText(config, key).value_or(""));
  };
  return {text("bos_token"), text("eos_token"), text("unk_token"), text("pad_token")};
}

// The texts of a tokenizer's own special token ids (a GGUF file's).
SpecialTokenTexts TokenizerSpecialTokens(const Tokenizer& t) {
  auto text = [&](int32_t id) {
    return id >= 0 && id < t.vocab_size() ? std::string(t.TokenText(id)) : std::string();
  };
  const VocabSpec& spec = t.spec();
  return {text(spec.bos_id), text(spec.eos_id), text(spec.unk_id), text(spec.pad_id)};
}

// The chat template and its special tokens that go with a tokenizer file (GGUF, or
// tokenizer.json's directory) and the tokenizer read from it.
void SetChatFor(const std::string& tokenizer_path, LoadedModel* m) {
  if (IsJsonPath(tokenizer_path)) {
    const std::string dir = std::filesystem::path(tokenizer_path).parent_path().string();
    m->chat_template = HfChatTemplate(dir);
    m->chat_tokens = HfSpecialTokens(dir);
    return;
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(tokenizer_path);
  m->chat_template = f.ok() ? GgufChatTemplate(**f) : std::string();
  m->chat_tokens = TokenizerSpecialTokens(*m->tokenizer);
}

// Where vLLM finds the end-of-generation ids besides the tokenizer's EOS (hf_eos.h): `dir`'s
// generation_config.json (its text, read by the caller), else its config.json, else none.
absl::StatusOr<std::vector<int32_t>> EosIdsFrom(
    const std::string& dir, const std::optional<std::string>& generation_config) {
  const std::string where = (std::filesystem::path(dir) / "generation_config.json").string();
  if (generation_config.has_value()) return EosIdsFromGenerationConfig(*generation_config, where);
  if (std::optional<std::string> config = ReadSideFile(dir, "config.json")) {
    return EosIdsFromConfigJson(*config, (std::filesystem::path(dir) / "config.json").string());
  }
  return std::vector<int32_t>();
}

absl::StatusOr<GgmlType> ParseDummyType(const std::string& t) {
  if (t == "q4_0") return GgmlType::kQ4_0;
  if (t == "q4_1") return GgmlType::kQ4_1;
  if (t == "q8_0") return GgmlType::kQ8_0;
  if (t == "f16") return GgmlType::kF16;
  if (t == "bf16") return GgmlType::kBF16;
  if (t == "f32") return GgmlType::kF32;
  return absl::InvalidArgumentError(absl::StrCat("unknown dummy weight type '", t, "'"));
}

}  // namespace

absl::StatusOr<std::optional<std::string>> ReadGenerationConfig(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot read ", path.string()));
  if (size > kMaxGenerationConfigFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), " is larger than ", kMaxGenerationConfigFileBytes, " bytes"));
  }
  std::optional<std::string> text = ReadSideFile(dir, "generation_config.json");
  if (!text.has_value()) return absl::InternalError(absl::StrCat("cannot read ", path.string()));
  return text;
}

absl::StatusOr<LoadedModel> LoadModel(const LoadModelOptions& o) {
  LoadedModel m;
  std::vector<int32_t> eos_ids;  // --generation-config DIR's or a Hugging Face checkpoint's
  if (!o.generation_config_dir.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> dir_config,
                     ReadGenerationConfig(o.generation_config_dir));
    ASSIGN_OR_RETURN(eos_ids, EosIdsFrom(o.generation_config_dir, dir_config));
  }
  std::string format = o.format;
  if (format == "auto") format = IsDirectory(o.path) ? "hf" : "gguf";
  if (format == "gguf") {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(o.path));
    std::shared_ptr<GgufFile> gguf(std::move(file));
    if (o.tokenizer_path.empty()) {
      ASSIGN_OR_RETURN(VocabSpec spec, VocabFromGguf(*gguf));
      AddEndOfGenerationIds(eos_ids, &spec);
      ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::Create(std::move(spec)));
      m.chat_template = GgufChatTemplate(*gguf);
      m.chat_tokens = TokenizerSpecialTokens(*m.tokenizer);
    }
    ASSIGN_OR_RETURN(m.checkpoint, ReadGgufCheckpoint(gguf));
    gguf->ReleaseMetadataArrays();  // everything read from them is in the tokenizer and config
  } else if (format == "hf") {
    ASSIGN_OR_RETURN(std::unique_ptr<HfCheckpoint> ckpt, HfCheckpoint::Open(o.path));
    std::shared_ptr<HfCheckpoint> shared(std::move(ckpt));
    ASSIGN_OR_RETURN(m.generation_config, ReadGenerationConfig(o.path));
    if (o.generation_config_dir.empty()) {
      ASSIGN_OR_RETURN(eos_ids, EosIdsFrom(o.path, m.generation_config));
    }
    if (o.tokenizer_path.empty()) {
      ASSIGN_OR_RETURN(std::string json, shared->ReadTokenizerJson());
      ASSIGN_OR_RETURN(VocabSpec spec, VocabSpecFromHfTokenizerJson(json));
      AddEndOfGenerationIds(eos_ids, &spec);
      ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::Create(std::move(spec)));
      m.chat_template = HfChatTemplate(o.path);
      m.chat_tokens = HfSpecialTokens(o.path);
    }
    ASSIGN_OR_RETURN(m.checkpoint, ReadHfCheckpoint(shared));
  } else if (format == "dummy") {
    ASSIGN_OR_RETURN(ModelConfig config, DummyModelPreset(o.dummy_preset));
    ASSIGN_OR_RETURN(GgmlType type, ParseDummyType(o.dummy_type));
    if (o.dummy_generated_by_backend) {
      ASSIGN_OR_RETURN(m.checkpoint, MakeGeneratedCheckpoint(config, type, o.dummy_seed));
    } else {
      ASSIGN_OR_RETURN(m.checkpoint, MakeDummyCheckpoint(config, type, o.dummy_seed));
    }
    const std::string tok = !o.tokenizer_path.empty() ? o.tokenizer_path : o.path;
    if (tok.empty())
      return absl::InvalidArgumentError(
          "--load-format dummy needs --tokenizer (or --model) for text");
    ASSIGN_OR_RETURN(m.tokenizer, LoadTokenizer(tok));
    SetChatFor(tok, &m);
    return m;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown load format '", o.format, "' (auto, gguf, hf, dummy)"));
  }
  if (!o.tokenizer_path.empty()) {
    ASSIGN_OR_RETURN(m.tokenizer, LoadTokenizer(o.tokenizer_path, eos_ids));
    SetChatFor(o.tokenizer_path, &m);
  }
  return m;
}

}  // namespace pagellm
