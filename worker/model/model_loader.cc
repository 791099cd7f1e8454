#include "worker/model/model_loader.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/model/gguf_file.h"
#include "worker/model/gguf_vocab.h"
#include "worker/model/hf_checkpoint.h"

namespace pagellm {
namespace {

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// A tokenizer from a GGUF file or a tokenizer.json.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json") {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream ss;
    ss << in.rdbuf();
    return Tokenizer::FromHfTokenizerJson(ss.str());
  }
  ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(path));
  ASSIGN_OR_RETURN(VocabSpec spec, VocabFromGguf(*gguf));
  return Tokenizer::Create(std::move(spec));
}

// The chat template of a GGUF file ("" when absent or not a string).
std::string GgufChatTemplate(const GgufFile& f) {
  absl::StatusOr<std::string_view> t = f.GetString("tokenizer.chat_template");
  return t.ok() ? std::string(*t) : std::string();
}

// chat_template from the tokenizer_config.json in `dir` ("" when absent). HF stores a string,
// or a list of {name, template} of which "default" is the chat template.
std::string HfChatTemplate(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "tokenizer_config.json", std::ios::binary);
  if (!in) return "";
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
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

// The chat template that goes with a tokenizer file (GGUF, or tokenizer.json's directory).
std::string ChatTemplateFor(const std::string& tokenizer_path) {
  if (tokenizer_path.size() >= 5 && tokenizer_path.substr(tokenizer_path.size() - 5) == ".json") {
    return HfChatTemplate(std::filesystem::path(tokenizer_path).parent_path().string());
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(tokenizer_path);
  return f.ok() ? GgufChatTemplate(**f) : std::string();
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

absl::StatusOr<LoadedModel> LoadModel(const LoadModelOptions& o) {
  LoadedModel m;
  std::string format = o.format;
  if (format == "auto") format = IsDirectory(o.path) ? "hf" : "gguf";
  if (format == "gguf") {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(o.path));
    std::shared_ptr<GgufFile> gguf(std::move(file));
    if (o.tokenizer_path.empty()) {
      ASSIGN_OR_RETURN(VocabSpec spec, VocabFromGguf(*gguf));
      ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::Create(std::move(spec)));
      m.chat_template = GgufChatTemplate(*gguf);
    }
    ASSIGN_OR_RETURN(m.checkpoint, ReadGgufCheckpoint(gguf));
    gguf->ReleaseMetadataArrays();  // everything read from them is in the tokenizer and config
  } else if (format == "hf") {
    ASSIGN_OR_RETURN(std::unique_ptr<HfCheckpoint> ckpt, HfCheckpoint::Open(o.path));
    std::shared_ptr<HfCheckpoint> shared(std::move(ckpt));
    if (o.tokenizer_path.empty()) {
      ASSIGN_OR_RETURN(std::string json, shared->ReadTokenizerJson());
      ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::FromHfTokenizerJson(json));
      m.chat_template = HfChatTemplate(o.path);
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
    m.chat_template = ChatTemplateFor(tok);
    return m;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown load format '", o.format, "' (auto, gguf, hf, dummy)"));
  }
  if (!o.tokenizer_path.empty()) {
    ASSIGN_OR_RETURN(m.tokenizer, LoadTokenizer(o.tokenizer_path));
    m.chat_template = ChatTemplateFor(o.tokenizer_path);
  }
  return m;
}

}  // namespace pagellm
