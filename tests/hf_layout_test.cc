// The default model converted to the Hugging Face layout by tools/convert/gguf_to_hf.py (F32
// safetensors, Q/K rows un-permuted to rotate-half RoPE, tokenizer.json) loads and gives the
// same logits as the GGUF (within 1e-4 relative to the largest logit), single-file and sharded.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"
#include "worker/model/model_loader.h"

namespace pagellm {
namespace {

constexpr char kGguf[] = "models/SmolLM2-135M-Instruct.F32.gguf";

class HfLayoutTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfLayoutTest, LogitsMatchTheGguf) {
  const char* dir = GetParam();
  for (const char* p : {kGguf, dir}) {
    PAGELLM_SKIP_WITHOUT_MODEL(p);
  }
  CpuBackendOptions o;
  o.threads = 2;
  o.kv_cache_dtype = "f32";
  o.num_kv_blocks = 64;
  auto gguf = testing::OpenModel(kGguf, o);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto hf = testing::OpenModel(dir, o);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::string text = "<|im_start|>user\nName three rivers in Europe.<|im_end|>\n";
  const auto ids = gguf->tokenizer->Encode(text, true, true);
  // The HF tokenizer.json tokenizes identically.
  EXPECT_EQ(hf->tokenizer->Encode(text, true, true), ids);
  auto a = testing::AllPositionLogits(gguf->backend.get(), ids);
  auto b = testing::AllPositionLogits(hf->backend.get(), ids);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    ASSERT_FALSE(std::isnan((*b)[i]));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>((*a)[i]) - (*b)[i]));
    max_abs = std::max(max_abs, std::fabs(static_cast<double>((*a)[i])));
  }
  std::printf("%s: %zu positions, max |diff| %.3g, max |logit| %.3g, relative %.3g\n", dir,
              ids.size(), max_diff, max_abs, max_diff / max_abs);
  EXPECT_LE(max_diff / max_abs, 1e-4);
}

// The GGUF reader renames llama.cpp's tensors to the canonical (Hugging Face) names; the
// converter, written with the `gguf` and `safetensors` packages, writes the HF names itself. The
// two checkpoints must hold the same tensors with the same shapes.
TEST_P(HfLayoutTest, GgufAndHfCheckpointsHoldTheSameTensors) {
  const char* dir = GetParam();
  for (const char* p : {kGguf, dir}) {
    PAGELLM_SKIP_WITHOUT_MODEL(p);
  }
  auto read = [](const char* path) {
    LoadModelOptions lo;
    lo.path = path;
    return LoadModel(lo);
  };
  auto gguf = read(kGguf);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto hf = read(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const TensorMap& a = gguf->checkpoint->tensors;
  const TensorMap& b = hf->checkpoint->tensors;
  EXPECT_EQ(a.Names(), b.Names());
  EXPECT_EQ(a.size(), 272u);  // embedding, 30 layers of 9, final norm; tied head
  for (const std::string& name : a.Names()) {
    const TensorView* t = b.Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(a.Find(name)->shape, t->shape) << name;
  }
  EXPECT_FALSE(gguf->checkpoint->rope_neox);  // llama.cpp's interleaved Q/K rows
  EXPECT_TRUE(hf->checkpoint->rope_neox);
}

// The chat template and the special tokens it sees: the converter (written with the `gguf`
// package) copies them from the GGUF's metadata into tokenizer_config.json; the loader reads
// the GGUF's token ids' texts on one side and the JSON on the other.
TEST_P(HfLayoutTest, ChatTemplateAndSpecialTokensMatchTheGguf) {
  const char* dir = GetParam();
  for (const char* p : {kGguf, dir}) {
    PAGELLM_SKIP_WITHOUT_MODEL(p);
  }
  LoadModelOptions lo;
  lo.path = kGguf;
  auto gguf = LoadModel(lo);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  lo.path = dir;
  auto hf = LoadModel(lo);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_FALSE(hf->chat_template.empty());
  EXPECT_EQ(hf->chat_template, gguf->chat_template);
  EXPECT_FALSE(hf->chat_tokens.bos.empty());
  EXPECT_EQ(hf->chat_tokens.bos, gguf->chat_tokens.bos);
  EXPECT_EQ(hf->chat_tokens.eos, gguf->chat_tokens.eos);
  EXPECT_EQ(hf->chat_tokens.unk, gguf->chat_tokens.unk);
}

// As transformers loads an HF tokenizer: chat_template.jinja before tokenizer_config.json's
// chat_template; a special token as a string or an AddedToken object; special_tokens_map.json
// overriding the config only in the legacy layout (no added_tokens_decoder in the config).
TEST(HfSideFilesTest, TemplateFileAndSpecialTokenFallbacks) {
  const std::string model = "models/SmolLM2-135M-Instruct-hf";
  PAGELLM_SKIP_WITHOUT_MODEL(model);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "hf_side_files";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::filesystem::create_symlink(std::filesystem::absolute(model) / f, dir / f);
  }
  auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  };
  write("tokenizer_config.json",
        R"({"bos_token": {"content": "<|im_start|>", "lstrip": false}, "unk_token": null,
            "chat_template": "from the config"})");
  write("special_tokens_map.json",
        R"({"eos_token": "<|im_end|>", "pad_token": {"content": "<pad>"}})");
  LoadModelOptions lo;
  lo.path = dir.string();
  auto m = LoadModel(lo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->chat_template, "from the config");
  EXPECT_EQ(m->chat_tokens.bos, "<|im_start|>");
  EXPECT_EQ(m->chat_tokens.eos, "<|im_end|>");
  EXPECT_EQ(m->chat_tokens.unk, "");
  EXPECT_EQ(m->chat_tokens.pad, "<pad>");

  write("tokenizer_config.json", R"({"bos_token": "<s>", "added_tokens_decoder": {}})");
  m = LoadModel(lo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->chat_tokens.bos, "<s>");
  EXPECT_EQ(m->chat_tokens.eos, "") << "special_tokens_map.json is legacy";

  write("chat_template.jinja", "{{ messages[0].content }} from the file");
  m = LoadModel(lo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->chat_template, "{{ messages[0].content }} from the file");
}

// As vLLM: generation stops at the ids generation_config.json's eos_token_id lists, else at
// config.json's (worker/model/hf_eos.h, checked against transformers there); an id the
// tokenizer lacks is left out, and a malformed one stops the load naming the file.
TEST(HfSideFilesTest, GenerationConfigEosIdsEndGeneration) {
  const std::string model = "models/SmolLM2-135M-Instruct-hf";
  PAGELLM_SKIP_WITHOUT_MODEL(model);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "hf_eos";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) {
    std::filesystem::create_symlink(std::filesystem::absolute(model) / f, dir / f);
  }
  std::ifstream config_in(std::filesystem::path(model) / "config.json", std::ios::binary);
  std::stringstream config;
  config << config_in.rdbuf();
  auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  };
  LoadModelOptions lo;
  lo.path = dir.string();
  constexpr int32_t kWord = 1000;  // an ordinary token
  write("config.json", config.str());
  auto m = LoadModel(lo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->tokenizer->IsEndOfGeneration(kWord));
  const std::vector<int32_t> before = m->tokenizer->end_of_generation_ids();

  write("generation_config.json", R"({"eos_token_id": [2, 1000, 999999], "temperature": 0.6})");
  m = LoadModel(lo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->tokenizer->IsEndOfGeneration(kWord));
  EXPECT_TRUE(m->tokenizer->IsEndOfGeneration(2));
  EXPECT_EQ(m->tokenizer->end_of_generation_ids().size(), before.size() + 1) << "999999 is out";

  std::filesystem::remove(dir / "generation_config.json");
  nlohmann::json with_id = nlohmann::json::parse(config.str());
  with_id["eos_token_id"] = {1000};
  write("config.json", with_id.dump());
  m = LoadModel(lo);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->tokenizer->IsEndOfGeneration(kWord)) << "config.json's eos_token_id";

  write("generation_config.json", R"({"eos_token_id": "2"})");
  m = LoadModel(lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("generation_config.json"), std::string::npos) << m.status();
}

// vLLM's --generation-config DIR: the ids come from DIR's generation_config.json, else DIR's
// config.json, else nowhere -- not from the model's files -- for an HF checkpoint and a GGUF
// file alike (vllm/config/model.py try_get_generation_config).
TEST(HfSideFilesTest, AGenerationConfigDirGivesTheEosIds) {
  const std::string model = "models/SmolLM2-135M-Instruct-hf";
  const std::string gguf = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  PAGELLM_SKIP_WITHOUT_MODEL(model);
  PAGELLM_SKIP_WITHOUT_MODEL(gguf);
  const std::filesystem::path root = std::filesystem::path(::testing::TempDir()) / "hf_eos_dir";
  std::filesystem::remove_all(root);
  const std::filesystem::path ckpt = root / "model", dir = root / "config_dir";
  std::filesystem::create_directories(ckpt);
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::filesystem::create_symlink(std::filesystem::absolute(model) / f, ckpt / f);
  }
  auto write = [](const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  };
  write(ckpt / "generation_config.json", R"({"eos_token_id": [1000]})");
  constexpr int32_t kModels = 1000, kDirs = 1001, kDirsConfig = 1002;  // ordinary tokens
  auto eog = [](const LoadModelOptions& lo) {
    auto m = LoadModel(lo);
    EXPECT_TRUE(m.ok()) << m.status();
    std::vector<bool> out;
    for (int32_t id : {kModels, kDirs, kDirsConfig}) {
      out.push_back(m.ok() && m->tokenizer->IsEndOfGeneration(id));
    }
    return out;
  };
  for (const std::string& path : {ckpt.string(), gguf}) {
    SCOPED_TRACE(path);
    LoadModelOptions lo;
    lo.path = path;
    const bool hf = path == ckpt.string();
    EXPECT_EQ(eog(lo), (std::vector<bool>{hf, false, false})) << "the model's own files";
    lo.generation_config_dir = dir.string();
    EXPECT_EQ(eog(lo), (std::vector<bool>{false, false, false})) << "an empty DIR: none";
    write(dir / "config.json", R"({"model_type": "llama", "eos_token_id": 1002})");
    EXPECT_EQ(eog(lo), (std::vector<bool>{false, false, true})) << "DIR's config.json";
    write(dir / "generation_config.json", R"({"eos_token_id": [1001], "temperature": 0.6})");
    EXPECT_EQ(eog(lo), (std::vector<bool>{false, true, false})) << "DIR's generation_config";
    write(dir / "generation_config.json", R"({"eos_token_id": -3})");
    auto bad = LoadModel(lo);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find((dir / "generation_config.json").string()),
              std::string::npos)
        << bad.status();
    std::filesystem::remove(dir / "generation_config.json");
    std::filesystem::remove(dir / "config.json");
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, HfLayoutTest,
                         ::testing::Values("models/SmolLM2-135M-Instruct-hf",
                                           "models/SmolLM2-135M-Instruct-hf-sharded"));

}  // namespace
}  // namespace pagellm
