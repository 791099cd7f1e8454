// PEFT adapter directory -> LoraAdapter. The config is read first and every feature this
// loader does not implement is refused by name; then each tensor of the safetensors file must be
// one A or B of a module the base model has, of the base model's shape; then the pairs are
// converted to fp32 in the kernels' layout.
#include "worker/model/lora_adapter.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/half.h"
#include "common/json/strict_json.h"
#include "common/status_macros.h"
#include "worker/model/mapped_file.h"
#include "worker/model/safetensors_file.h"

namespace pagellm {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kConfigFile[] = "adapter_config.json";
constexpr char kWeightsFile[] = "adapter_model.safetensors";

// What stat(2) says of `path` that changes when the file is replaced or written ("" if missing).
std::string DescribeFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, ":", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec);
}

// Each module's name inside a layer, in LoraModule order.
constexpr absl::string_view kModules[kNumLoraModules] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

absl::Status Bad(const std::string& file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
}

// True when key is absent, null, false, an empty container or an empty string.
bool Unset(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (it->is_boolean()) return !it->get<bool>();
  if (it->is_object() || it->is_array() || it->is_string()) return it->empty();
  return false;
}

struct PeftConfig {
  int64_t r = 0;
  double alpha = 0;
  bool rslora = false;
};

absl::StatusOr<PeftConfig> ParseConfig(const std::string& path, const LoraLoadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path, "LoRA adapter config"));
  if (file->size() > static_cast<uint64_t>(options.max_config_bytes)) {
    return Bad(path, absl::StrCat("has ", file->size(), " bytes, more than the cap of ",
                                  options.max_config_bytes));
  }
  auto parsed =
      ParseStrictJson(std::string_view(reinterpret_cast<const char*>(file->data()), file->size()));
  if (!parsed.ok()) return Bad(path, parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) return Bad(path, "is not a JSON object");
  auto type = j.find("peft_type");
  if (type != j.end() && !(type->is_string() && type->get<std::string>() == "LORA")) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": peft_type ", type->dump(), " (only LORA adapters are served)"));
  }
  for (const char* feature : {"use_dora", "fan_in_fan_out", "modules_to_save", "rank_pattern",
                              "alpha_pattern", "layer_replication"}) {
    if (!Unset(j, feature)) {
      return absl::UnimplementedError(absl::StrCat(path, ": ", feature, " is not supported"));
    }
  }
  if (auto bias = j.find("bias");
      bias != j.end() && !(bias->is_string() && bias->get<std::string>() == "none")) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": bias ", bias->dump(), " (only \"none\" is supported)"));
  }
  PeftConfig c;
  auto r = j.find("r");
  if (r == j.end() || !r->is_number_integer() || r->get<int64_t>() <= 0) {
    return Bad(path, "r must be a positive integer");
  }
  c.r = r->get<int64_t>();
  if (c.r > options.max_rank) {
    return Bad(path, absl::StrCat("rank ", c.r, " is above --max-lora-rank ", options.max_rank));
  }
  auto alpha = j.find("lora_alpha");
  if (alpha == j.end() || !alpha->is_number() || !std::isfinite(alpha->get<double>()) ||
      alpha->get<double>() == 0 || std::fabs(alpha->get<double>()) > 1e6) {
    return Bad(path, "lora_alpha must be a finite, non-zero number");
  }
  c.alpha = alpha->get<double>();
  if (auto rs = j.find("use_rslora"); rs != j.end() && !rs->is_null()) {
    if (!rs->is_boolean()) return Bad(path, "use_rslora must be a boolean");
    c.rslora = rs->get<bool>();
  }
  return c;
}

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" -> (3, kLoraQ, A).
struct TensorKey {
  int64_t layer = -1;
  int module = -1;
  bool is_a = false;
};
std::optional<TensorKey> ParseTensorName(absl::string_view name) {
  constexpr absl::string_view kPrefix = "base_model.model.model.layers.";
  if (!absl::StartsWith(name, kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  TensorKey key;
  if (!absl::SimpleAtoi(name.substr(0, dot), &key.layer) || key.layer < 0) return std::nullopt;
  name.remove_prefix(dot + 1);
  for (int m = 0; m < kNumLoraModules; ++m) {
    const absl::string_view module = kModules[m];
    if (!absl::StartsWith(name, module)) continue;
    const absl::string_view rest = name.substr(module.size());
    if (rest == ".lora_A.weight" || rest == ".lora_B.weight") {
      key.module = m;
      key.is_a = rest == ".lora_A.weight";
      return key;
    }
  }
  return std::nullopt;
}

// The tensor's values as fp32 (F32, F16 or BF16 storage; read through memcpy: the format does
// not promise alignment).
absl::Status ToFloats(const SafetensorsTensor& t, std::vector<float>* out) {
  out->resize(t.num_elements);
  const int64_t n = t.num_elements;
  switch (t.dtype) {
    case SafetensorsDtype::kF32:
      std::memcpy(out->data(), t.data, n * sizeof(float));
      break;
    case SafetensorsDtype::kF16:
    case SafetensorsDtype::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        (*out)[i] = t.dtype == SafetensorsDtype::kF16 ? HalfToFloat(h) : Bf16ToFloat(h);
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has dtype ",
                                                     std::string(SafetensorsDtypeName(t.dtype)),
                                                     " (F32, F16 or BF16)"));
  }
  for (float v : *out) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " holds ", v));
    }
  }
  return absl::OkStatus();
}

// Row index in the base checkpoint of HF (rotate-half) row `row` of a Q/K projection, for
// GGUF llama's interleaved pairs: within each head, row i of the first half goes to 2i and row
// i of the second half to 2i + 1 (llama.cpp's permute at conversion).
int64_t InterleavedRow(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim, i = row % head_dim, half = head_dim / 2;
  return head * head_dim + (i < half ? 2 * i : 2 * (i - half) + 1);
}

}  // namespace

std::pair<int64_t, int64_t> LoraModuleShape(const ModelConfig& c, LoraModule m) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  switch (m) {
    case kLoraQ:
      return {q, c.hidden_size};
    case kLoraK:
    case kLoraV:
      return {kv, c.hidden_size};
    case kLoraO:
      return {c.hidden_size, q};
    case kLoraGate:
    case kLoraUp:
      return {c.intermediate_size, c.hidden_size};
    case kLoraDown:
      break;
  }
  return {c.hidden_size, c.intermediate_size};
}

int64_t LoraAdapter::HostBytes() const {
  int64_t bytes = 0;
  for (const auto& layer : layers) {
    for (const LoraMatrix& m : layer) {
      bytes += static_cast<int64_t>((m.a.size() + m.bt.size()) * sizeof(float));
    }
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadLoraAdapter(const std::string& name,
                                                             const std::string& dir,
                                                             const ModelConfig& config,
                                                             bool rope_neox,
                                                             const LoraLoadOptions& options) {
  const std::string config_path = absl::StrCat(dir, "/", kConfigFile);
  const std::string weights_path = absl::StrCat(dir, "/", kWeightsFile);
  // Described before they are read: a change while they are read shows at the next read.
  const std::string files =
      absl::StrCat(DescribeFile(config_path), ";", DescribeFile(weights_path));
  ASSIGN_OR_RETURN(PeftConfig pc, ParseConfig(config_path, options));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(weights_path));

  auto adapter = std::make_unique<LoraAdapter>();
  adapter->name = name;
  adapter->path = dir;
  adapter->files = files;
  adapter->rank = pc.r;
  adapter->scaling = static_cast<float>(pc.rslora ? pc.alpha / std::sqrt(static_cast<double>(pc.r))
                                                  : pc.alpha / pc.r);
  adapter->layers.resize(config.num_layers);

  // Pair every tensor with its module; shapes checked before anything is converted.
  std::vector<std::array<const SafetensorsTensor*, 2 * kNumLoraModules>> found(config.num_layers);
  for (const SafetensorsTensor& t : file->tensors()) {
    const std::optional<TensorKey> key = ParseTensorName(t.name);
    if (!key) {
      if (t.name.find("lora_embedding") != std::string::npos ||
          t.name.find("embed_tokens") != std::string::npos ||
          t.name.find("lm_head") != std::string::npos) {
        return absl::UnimplementedError(absl::StrCat(weights_path, ": tensor ", t.name,
                                                     " adapts the embedding or output head"));
      }
      return Bad(weights_path, absl::StrCat("tensor ", t.name,
                                            " is not a LoRA A or B of a "
                                            "Llama attention or MLP projection"));
    }
    if (key->layer >= config.num_layers) {
      return Bad(weights_path, absl::StrCat("tensor ", t.name, ": the base model has ",
                                            config.num_layers, " layers"));
    }
    const auto [n_out, n_in] = LoraModuleShape(config, static_cast<LoraModule>(key->module));
    const std::vector<int64_t> want =
        key->is_a ? std::vector<int64_t>{pc.r, n_in} : std::vector<int64_t>{n_out, pc.r};
    if (t.shape != want) {
      return Bad(weights_path,
                 absl::StrCat("tensor ", t.name, " has shape ", ShapeString(t.shape),
                              ", the base model and r = ", pc.r, " need ", ShapeString(want)));
    }
    found[key->layer][2 * key->module + (key->is_a ? 0 : 1)] = &t;
  }

  std::vector<float> values;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      const SafetensorsTensor* a = found[l][2 * m];
      const SafetensorsTensor* b = found[l][2 * m + 1];
      if (a == nullptr && b == nullptr) continue;
      if (a == nullptr || b == nullptr) {
        return Bad(weights_path, absl::StrCat("tensor ", (a != nullptr ? a : b)->name, " has no ",
                                              a == nullptr ? "lora_A" : "lora_B"));
      }
      const auto [n_out, n_in] = LoraModuleShape(config, static_cast<LoraModule>(m));
      LoraMatrix& out = adapter->layers[l][m];
      out.n_in = n_in;
      out.n_out = n_out;
      if (absl::Status st = ToFloats(*a, &out.a); !st.ok()) return Bad(weights_path, st.message());
      if (absl::Status st = ToFloats(*b, &values); !st.ok()) return Bad(weights_path, st.message());
      const bool interleave = !rope_neox && (m == kLoraQ || m == kLoraK);
      out.bt.resize(pc.r * n_out);
      for (int64_t o = 0; o < n_out; ++o) {
        const int64_t row = interleave ? InterleavedRow(o, config.head_dim) : o;
        for (int64_t j = 0; j < pc.r; ++j) {
          out.bt[j * n_out + row] = adapter->scaling * values[o * pc.r + j];
        }
      }
    }
  }
  return adapter;
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> ShardLoraAdapter(const LoraAdapter& adapter,
                                                              const ShardSpec& shard) {
  if (shard.world_size < 1 || shard.rank < 0 || shard.rank >= shard.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", shard.rank, " of a group of ", shard.world_size));
  }
  auto out = std::make_unique<LoraAdapter>(adapter);
  const int64_t ws = shard.world_size, rank = adapter.rank;
  for (auto& layer : out->layers) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      LoraMatrix& lm = layer[m];
      if (lm.empty()) continue;
      const bool row_parallel = m == kLoraO || m == kLoraDown;
      const int64_t split = row_parallel ? lm.n_in : lm.n_out;
      if (split % ws != 0) {
        return absl::InvalidArgumentError(absl::StrCat("LoRA adapter ", adapter.name, ": ", split,
                                                       " is not divisible by ", ws, " ranks"));
      }
      const int64_t part = split / ws, begin = shard.rank * part;
      // Rows of [rank][split] keep columns [begin, begin + part).
      std::vector<float>& v = row_parallel ? lm.a : lm.bt;
      std::vector<float> sliced(rank * part);
      for (int64_t j = 0; j < rank; ++j) {
        std::memcpy(sliced.data() + j * part, v.data() + j * split + begin, part * sizeof(float));
      }
      v = std::move(sliced);
      (row_parallel ? lm.n_in : lm.n_out) = part;
    }
  }
  return out;
}

}  // namespace pagellm
