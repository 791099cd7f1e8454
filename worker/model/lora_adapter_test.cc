#include "worker/model/lora_adapter.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "worker/model/testing/tiny_model.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

// One tensor of an adapter file: its name, shape and fp32 values.
struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

std::string Safetensors(const std::vector<Tensor>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::string data;
  for (const Tensor& t : tensors) {
    const size_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + bytes}}};
    data.append(reinterpret_cast<const char*>(t.values.data()), bytes);
  }
  const std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string Name(int layer, const std::string& module, char ab) {
  return absl::StrCat("base_model.model.model.layers.", layer, ".", module, ".lora_",
                      std::string(1, ab), ".weight");
}

// Values i * step + offset: every element distinct, so a transposed or permuted copy shows.
std::vector<float> Ramp(int64_t n, float offset, float step = 0.001f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = offset + step * static_cast<float>(i);
  return v;
}

class LoraAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pagellm_lora_XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    config_ = testing::TinyLlamaConfig();  // hidden 32, 4 heads of 8, 2 KV heads, inter 64
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream out(absl::StrCat(dir_, "/", name), std::ios::binary);
    out << bytes;
  }
  void WriteConfig(nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json c = {{"peft_type", "LORA"},
                        {"r", 2},
                        {"lora_alpha", 8},
                        {"bias", "none"},
                        {"use_dora", false},
                        {"modules_to_save", nullptr},
                        {"target_modules", {"q_proj", "v_proj"}}};
    for (auto& [k, v] : extra.items()) c[k] = v;
    Write("adapter_config.json", c.dump());
  }
  // q_proj and down_proj of layer 1, rank 2.
  std::vector<Tensor> TwoModules() {
    return {{Name(1, "self_attn.q_proj", 'A'), {2, 32}, Ramp(64, 0.1f)},
            {Name(1, "self_attn.q_proj", 'B'), {32, 2}, Ramp(64, -0.2f)},
            {Name(1, "mlp.down_proj", 'A'), {2, 64}, Ramp(128, 0.3f)},
            {Name(1, "mlp.down_proj", 'B'), {32, 2}, Ramp(64, 0.4f)}};
  }
  absl::StatusOr<std::unique_ptr<LoraAdapter>> Load(bool rope_neox = true,
                                                    LoraLoadOptions options = {}) {
    return LoadLoraAdapter("sql", dir_, config_, rope_neox, options);
  }
  absl::Status LoadStatus() { return Load().status(); }

  std::string dir_;
  ModelConfig config_;
};

TEST_F(LoraAdapterTest, FoldsTheScalingIntoBTransposed) {
  WriteConfig();
  const std::vector<Tensor> tensors = TwoModules();
  Write("adapter_model.safetensors", Safetensors(tensors));
  auto adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  const LoraAdapter& a = **adapter;
  EXPECT_EQ(a.name, "sql");
  EXPECT_EQ(a.rank, 2);
  EXPECT_FLOAT_EQ(a.scaling, 4.0f);  // lora_alpha / r
  ASSERT_EQ(a.layers.size(), 2u);
  for (const LoraMatrix& m : a.layers[0]) EXPECT_TRUE(m.empty());
  EXPECT_TRUE(a.layers[1][kLoraK].empty());
  const LoraMatrix& q = a.layers[1][kLoraQ];
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(q.n_in, 32);
  EXPECT_EQ(q.n_out, 32);
  EXPECT_EQ(q.a, tensors[0].values);
  for (int64_t o = 0; o < 32; ++o) {
    for (int64_t j = 0; j < 2; ++j) {
      ASSERT_FLOAT_EQ(q.bt[j * 32 + o], 4.0f * tensors[1].values[o * 2 + j]);
    }
  }
  const LoraMatrix& down = a.layers[1][kLoraDown];
  EXPECT_EQ(down.n_in, 64);
  EXPECT_EQ(down.n_out, 32);
  EXPECT_EQ(a.HostBytes(), (64 + 64 + 128 + 64) * 4);
}

TEST_F(LoraAdapterTest, RsLoraScalesBySquareRootOfRank) {
  WriteConfig({{"use_rslora", true}, {"r", 2}, {"lora_alpha", 8}});
  Write("adapter_model.safetensors", Safetensors(TwoModules()));
  auto adapter = Load();
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_FLOAT_EQ((*adapter)->scaling, static_cast<float>(8 / std::sqrt(2.0)));
}

TEST_F(LoraAdapterTest, InterleavedBaseGetsQAndKRowsPermutedAsLlamaCpp) {
  WriteConfig();
  std::vector<Tensor> tensors = TwoModules();
  tensors.push_back({Name(0, "self_attn.k_proj", 'A'), {2, 32}, Ramp(64, 0.5f)});
  tensors.push_back({Name(0, "self_attn.k_proj", 'B'), {16, 2}, Ramp(32, 0.6f)});
  tensors.push_back({Name(0, "self_attn.v_proj", 'A'), {2, 32}, Ramp(64, 0.7f)});
  tensors.push_back({Name(0, "self_attn.v_proj", 'B'), {16, 2}, Ramp(32, 0.8f)});
  Write("adapter_model.safetensors", Safetensors(tensors));
  auto neox = Load(/*rope_neox=*/true);
  auto gguf = Load(/*rope_neox=*/false);
  ASSERT_TRUE(neox.ok() && gguf.ok());
  // llama.cpp's permute: within each head of 8 rows, HF row i < 4 goes to 2i, row 4 + i to 2i+1.
  const int hf_of_gguf[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (const auto& [layer, module, n_out] :
       {std::tuple<int, int, int>{1, kLoraQ, 32}, {0, kLoraK, 16}}) {
    const LoraMatrix& p = (*gguf)->layers[layer][module];
    const LoraMatrix& h = (*neox)->layers[layer][module];
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t row = 0; row < n_out; ++row) {
        const int64_t hf_row = row / 8 * 8 + hf_of_gguf[row % 8];
        ASSERT_EQ(p.bt[j * n_out + row], h.bt[j * n_out + hf_row]) << module << " row " << row;
      }
    }
    EXPECT_EQ(p.a, h.a);
  }
  // V, O and the MLP are not rotated: the same either way.
  EXPECT_EQ((*gguf)->layers[0][kLoraV].bt, (*neox)->layers[0][kLoraV].bt);
  EXPECT_EQ((*gguf)->layers[1][kLoraDown].bt, (*neox)->layers[1][kLoraDown].bt);
}

TEST_F(LoraAdapterTest, ShardingSplitsBOfColumnParallelAndAOfRowParallelModules) {
  WriteConfig();
  Write("adapter_model.safetensors", Safetensors(TwoModules()));
  auto whole = Load();
  ASSERT_TRUE(whole.ok());
  auto rank1 = ShardLoraAdapter(**whole, ShardSpec{1, 2});
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  const LoraMatrix& q = (*rank1)->layers[1][kLoraQ];
  const LoraMatrix& wq = (*whole)->layers[1][kLoraQ];
  EXPECT_EQ(q.a, wq.a);  // column-parallel: A whole, B's rows 16..31
  EXPECT_EQ(q.n_out, 16);
  for (int64_t j = 0; j < 2; ++j) {
    for (int64_t o = 0; o < 16; ++o) ASSERT_EQ(q.bt[j * 16 + o], wq.bt[j * 32 + 16 + o]);
  }
  const LoraMatrix& d = (*rank1)->layers[1][kLoraDown];
  const LoraMatrix& wd = (*whole)->layers[1][kLoraDown];
  EXPECT_EQ(d.bt, wd.bt);  // row-parallel: B whole, A's columns 32..63
  EXPECT_EQ(d.n_in, 32);
  for (int64_t j = 0; j < 2; ++j) {
    for (int64_t k = 0; k < 32; ++k) ASSERT_EQ(d.a[j * 32 + k], wd.a[j * 64 + 32 + k]);
  }
  EXPECT_FALSE(ShardLoraAdapter(**whole, ShardSpec{0, 3}).ok());  // 32 rows over 3 ranks
}

TEST_F(LoraAdapterTest, RefusesWhatItDoesNotImplementByName) {
  Write("adapter_model.safetensors", Safetensors(TwoModules()));
  for (const auto& [extra, code, words] :
       std::vector<std::tuple<nlohmann::json, absl::StatusCode, std::string>>{
           {{{"peft_type", "IA3"}}, absl::StatusCode::kUnimplemented, "peft_type"},
           {{{"use_dora", true}}, absl::StatusCode::kUnimplemented, "use_dora"},
           {{{"bias", "all"}}, absl::StatusCode::kUnimplemented, "bias"},
           {{{"fan_in_fan_out", true}}, absl::StatusCode::kUnimplemented, "fan_in_fan_out"},
           {{{"modules_to_save", {"lm_head"}}},
            absl::StatusCode::kUnimplemented,
            "modules_to_save"},
           {{{"rank_pattern", {{"q_proj", 4}}}}, absl::StatusCode::kUnimplemented, "rank_pattern"},
           {{{"r", 0}}, absl::StatusCode::kInvalidArgument, "r must be"},
           {{{"r", "2"}}, absl::StatusCode::kInvalidArgument, "r must be"},
           {{{"lora_alpha", nullptr}}, absl::StatusCode::kInvalidArgument, "lora_alpha"},
           {{{"use_rslora", "yes"}}, absl::StatusCode::kInvalidArgument, "use_rslora"},
       }) {
    WriteConfig(extra);
    const absl::Status st = LoadStatus();
    EXPECT_EQ(st.code(), code) << extra.dump() << ": " << st;
    EXPECT_THAT(st.message(), HasSubstr(words)) << extra.dump();
  }
  WriteConfig({{"r", 32}});
  const absl::Status st = Load(true, LoraLoadOptions{.max_rank = 16}).status();
  EXPECT_THAT(st.message(), HasSubstr("above --max-lora-rank 16"));
  Write("adapter_config.json", "[1, 2]");
  EXPECT_THAT(LoadStatus().message(), HasSubstr("not a JSON object"));
  Write("adapter_config.json", "{\"r\": 2, \"r\": 3}");
  EXPECT_THAT(LoadStatus().message(), HasSubstr("duplicate key"));
  Write("adapter_config.json", std::string(2 << 20, ' '));
  EXPECT_THAT(LoadStatus().message(), HasSubstr("more than the cap"));
}

TEST_F(LoraAdapterTest, RefusesTensorsThatDoNotFitTheBaseModel) {
  WriteConfig();
  auto check = [&](std::vector<Tensor> tensors, absl::StatusCode code, const std::string& words) {
    Write("adapter_model.safetensors", Safetensors(tensors));
    const absl::Status st = LoadStatus();
    EXPECT_EQ(st.code(), code) << st;
    EXPECT_THAT(st.message(), HasSubstr(words));
  };
  std::vector<Tensor> t = TwoModules();
  t[1].shape = {16, 4};  // B of q_proj: [32, 2] expected
  check(t, absl::StatusCode::kInvalidArgument, "need [32, 2]");
  t = TwoModules();
  t.pop_back();
  check(t, absl::StatusCode::kInvalidArgument, "has no lora_B");
  t = TwoModules();
  t.push_back({Name(2, "self_attn.q_proj", 'A'), {2, 32}, Ramp(64, 0)});
  check(t, absl::StatusCode::kInvalidArgument, "has 2 layers");
  t = TwoModules();
  t.push_back({"base_model.model.model.embed_tokens.lora_embedding_A", {2, 64}, Ramp(128, 0)});
  check(t, absl::StatusCode::kUnimplemented, "embedding or output head");
  t = TwoModules();
  t.push_back({"base_model.model.model.layers.0.self_attn.rotary.lora_A.weight", {2}, {1, 2}});
  check(t, absl::StatusCode::kInvalidArgument, "is not a LoRA A or B");
  t = TwoModules();
  t[2].values[5] = std::nanf("");
  check(t, absl::StatusCode::kInvalidArgument, "holds nan");
  std::filesystem::remove(absl::StrCat(dir_, "/adapter_model.safetensors"));
  EXPECT_EQ(LoadStatus().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pagellm
