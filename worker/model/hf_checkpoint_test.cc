#include "worker/model/hf_checkpoint.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Written by tools/fixtures/make_safetensors_fixture.py (CTest runs it first).
constexpr char kFixtureDir[] = ".cache/fixtures/safetensors";

constexpr char kTinyConfig[] =
    R"({"architectures":["LlamaForCausalLM"],"vocab_size":16,"hidden_size":8,)"
    R"("intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2})";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A safetensors file holding one U8 tensor of `size` bytes per name, each byte = its tensor's
// position in `names` + 1.
std::string TinyShard(const std::vector<std::string>& names, int size = 4) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::string data;
  for (size_t i = 0; i < names.size(); ++i) {
    header[names[i]] = {
        {"dtype", "U8"}, {"shape", {size}}, {"data_offsets", {data.size(), data.size() + size}}};
    data.append(size, static_cast<char>(i + 1));
  }
  std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagellm_hf_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

class HfCheckpointTest : public ::testing::Test {
 protected:
  // A checkpoint directory `ckpt` inside tmp_ with config.json and tokenizer.json.
  void SetUp() override {
    dir_ = tmp_ / "ckpt";
    ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0);
    Write("config.json", kTinyConfig);
    Write("tokenizer.json", R"({"model":{}})");
  }
  void Write(absl::string_view name, std::string_view bytes) {
    WriteAll(absl::StrCat(dir_, "/", name), bytes);
  }
  void WriteIndex(const nlohmann::json& weight_map) {
    Write("model.safetensors.index.json",
          nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());
  }
  absl::Status OpenStatus() { return HfCheckpoint::Open(dir_).status(); }

  TempDir tmp_;
  std::string dir_;
};

TEST_F(HfCheckpointTest, OpensSingleFile) {
  Write("model.safetensors", TinyShard({"a", "b"}));
  auto ckpt = HfCheckpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->num_shards(), 1u);
  EXPECT_EQ((*ckpt)->config().vocab_size, 16);
  EXPECT_THAT((*ckpt)->TensorNames(), ElementsAre("a", "b"));
  EXPECT_EQ((*ckpt)->Find("b")->data[0], 2);
  EXPECT_EQ((*ckpt)->Find("c"), nullptr);
  EXPECT_EQ((*ckpt)->GetFloatTensor("a").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ((*ckpt)->GetFloatTensor("c").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*ckpt)->tokenizer_json_path(), dir_ + "/tokenizer.json");
  auto tok = (*ckpt)->ReadTokenizerJson();
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(*tok, R"({"model":{}})");
}

TEST_F(HfCheckpointTest, OpensShardsThroughIndex) {
  Write("s1.safetensors", TinyShard({"a", "b"}));
  Write("s2.safetensors", TinyShard({"c", "unlisted"}));
  WriteIndex({{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}});
  auto ckpt = HfCheckpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->num_shards(), 2u);
  EXPECT_THAT((*ckpt)->TensorNames(), ElementsAre("a", "b", "c"));  // unlisted is ignored
  EXPECT_EQ((*ckpt)->Find("a")->data[0], 1);
  EXPECT_EQ((*ckpt)->Find("c")->data[0], 1);  // first tensor of s2
  EXPECT_EQ((*ckpt)->Find("unlisted"), nullptr);
}

TEST_F(HfCheckpointTest, SingleFileWinsOverIndex) {
  Write("model.safetensors", TinyShard({"single"}));
  WriteIndex({{"a", "missing.safetensors"}});
  auto ckpt = HfCheckpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_THAT((*ckpt)->TensorNames(), ElementsAre("single"));
}

TEST_F(HfCheckpointTest, RejectsShardNamesOutsideTheDirectory) {
  WriteAll(tmp_ / "outside.safetensors", TinyShard({"a"}));  // would open if allowed
  for (const char* shard : {"../outside.safetensors", "..", ".", "", "/etc/passwd",
                            "sub/x.safetensors", "..\\outside.safetensors"}) {
    WriteIndex({{"a", shard}});
    absl::Status s = OpenStatus();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << shard << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("not a plain file name")) << shard;
  }
  std::string with_nul("x\0y", 3);
  WriteIndex({{"a", with_nul}});
  EXPECT_EQ(OpenStatus().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(HfCheckpointTest, RejectsMissingShard) {
  Write("s1.safetensors", TinyShard({"a"}));
  WriteIndex({{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("s2.safetensors"));
}

TEST_F(HfCheckpointTest, RejectsTensorMissingFromItsShard) {
  Write("s1.safetensors", TinyShard({"a"}));
  Write("s2.safetensors", TinyShard({"b"}));
  WriteIndex({{"a", "s1.safetensors"}, {"b", "s1.safetensors"}});
  absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'b' is not in its shard"));
}

TEST_F(HfCheckpointTest, RejectsMalformedIndex) {
  Write("s1.safetensors", TinyShard({"a"}));
  Write("model.safetensors.index.json", "{\"weight_map\":");
  EXPECT_THAT(std::string(OpenStatus().message()), HasSubstr("not valid JSON"));
  Write("model.safetensors.index.json", "[]");
  EXPECT_THAT(std::string(OpenStatus().message()), HasSubstr("not a JSON object"));
  Write("model.safetensors.index.json", R"({"weight_map":[]})");
  EXPECT_THAT(std::string(OpenStatus().message()), HasSubstr("weight_map is not an object"));
  WriteIndex(nlohmann::json::object());
  EXPECT_THAT(std::string(OpenStatus().message()), HasSubstr("lists no tensors"));
  WriteIndex({{"a", 3}});
  EXPECT_THAT(std::string(OpenStatus().message()), HasSubstr("'a' is not a string"));
  EXPECT_EQ(OpenStatus().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(HfCheckpointTest, RejectsCorruptShard) {
  std::string shard = TinyShard({"a"});
  shard.pop_back();
  Write("model.safetensors", shard);
  absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("model.safetensors"));
}

TEST_F(HfCheckpointTest, ReportsMissingPieces) {
  EXPECT_EQ(OpenStatus().code(), absl::StatusCode::kNotFound);  // no weights
  EXPECT_THAT(std::string(OpenStatus().message()), HasSubstr("neither model.safetensors"));
  Write("model.safetensors", TinyShard({"a"}));
  ASSERT_EQ(::unlink((dir_ + "/tokenizer.json").c_str()), 0);
  EXPECT_EQ(OpenStatus().code(), absl::StatusCode::kNotFound);
  HfCheckpoint::Options options;
  options.require_tokenizer = false;
  auto ckpt = HfCheckpoint::Open(dir_, options);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->tokenizer_json_path(), "");
  EXPECT_EQ((*ckpt)->ReadTokenizerJson().status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(::unlink((dir_ + "/config.json").c_str()), 0);
  EXPECT_EQ(OpenStatus().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(HfCheckpoint::Open(tmp_ / "nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(HfCheckpoint::Open(tmp_ / "ckpt/model.safetensors").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(HfCheckpointTest, BadConfigNamesTheFile) {
  Write("model.safetensors", TinyShard({"a"}));
  Write("config.json", R"({"architectures":["BertModel"]})");
  absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("config.json"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("BertModel"));
}

// Checkpoints written by the `safetensors` Python package must read back byte for byte.
class HfCheckpointFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = absl::StrCat(kFixtureDir, "/expected.json");
    if (::access(path.c_str(), R_OK) != 0) {
      GTEST_SKIP() << path << " is missing: run tools/setup.sh, then "
                   << ".venv/bin/python tools/fixtures/make_safetensors_fixture.py " << kFixtureDir
                   << " (ctest does this)";
    }
    expected_ = nlohmann::json::parse(ReadAll(path));
  }
  nlohmann::json expected_;
};

TEST_P(HfCheckpointFixtureTest, MatchesWhatThePythonWriterWrote) {
  const std::string layout = GetParam();
  auto ckpt = HfCheckpoint::Open(absl::StrCat(kFixtureDir, "/", layout));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const nlohmann::json& tensors = expected_[layout];
  EXPECT_EQ((*ckpt)->TensorNames().size(), tensors.size());
  std::set<std::string> shards;
  for (const auto& [name, want] : tensors.items()) {
    SCOPED_TRACE(name);
    shards.insert(want["shard"].get<std::string>());
    const SafetensorsTensor* t = (*ckpt)->Find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(SafetensorsDtypeName(t->dtype), want["dtype"].get<std::string>());
    EXPECT_EQ(t->shape, want["shape"].get<std::vector<int64_t>>());
    const std::string bytes(reinterpret_cast<const char*>(t->data), t->nbytes);
    EXPECT_EQ(absl::BytesToHexString(bytes), want["hex"].get<std::string>());
    const bool is_float =
        want["dtype"] == "F32" || want["dtype"] == "F16" || want["dtype"] == "BF16";
    EXPECT_EQ((*ckpt)->GetFloatTensor(name).ok(), is_float);
  }
  EXPECT_EQ((*ckpt)->num_shards(), shards.size());

  const nlohmann::json& cfg = expected_["config"];
  const ModelConfig& c = (*ckpt)->config();
  EXPECT_EQ(c.vocab_size, cfg["vocab_size"].get<int64_t>());
  EXPECT_EQ(c.hidden_size, cfg["hidden_size"].get<int64_t>());
  EXPECT_EQ(c.intermediate_size, cfg["intermediate_size"].get<int64_t>());
  EXPECT_EQ(c.num_layers, cfg["num_hidden_layers"].get<int64_t>());
  EXPECT_EQ(c.num_heads, cfg["num_attention_heads"].get<int64_t>());
  EXPECT_EQ(c.num_kv_heads, cfg["num_key_value_heads"].get<int64_t>());
  EXPECT_EQ(c.tie_word_embeddings, cfg["tie_word_embeddings"].get<bool>());
  auto tok = (*ckpt)->ReadTokenizerJson();
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(nlohmann::json::parse(*tok)["model"]["type"], "WordLevel");
}

INSTANTIATE_TEST_SUITE_P(Layouts, HfCheckpointFixtureTest, ::testing::Values("single", "sharded"));

// The default model converted by tools/convert/gguf_to_hf.py (see its usage line).
TEST(HfCheckpointModelTest, OpensConvertedSmolLm2) {
  const std::string dir = "models/SmolLM2-135M-Instruct-hf";
  if (::access((dir + "/config.json").c_str(), R_OK) != 0) {
    GTEST_SKIP() << dir << " is missing: .venv/bin/python tools/convert/gguf_to_hf.py "
                 << "models/SmolLM2-135M-Instruct.Q4_1.gguf " << dir;
  }
  auto ckpt = HfCheckpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = (*ckpt)->config();
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ((*ckpt)->TensorNames().size(), 2u + 9u * 30u);  // embed, norm, 9 per layer
  EXPECT_EQ((*ckpt)->Find("lm_head.weight"), nullptr);
  auto k = (*ckpt)->GetFloatTensor("model.layers.29.self_attn.k_proj.weight");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ((*k)->dtype, SafetensorsDtype::kF32);
  EXPECT_THAT((*k)->shape, ElementsAre(3 * 64, 576));
}

}  // namespace
}  // namespace pagellm
