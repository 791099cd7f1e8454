#include "tools/simulate/hardware.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagellm::sim {
namespace {

const std::vector<GpuSpec>& Gpus() {
  static const auto* gpus = new std::vector<GpuSpec>{
      {"A100-40GB", 312e12, 1555e9, 40 * kGiB, 25e9},
      {"A100-80GB", 312e12, 2039e9, 80 * kGiB, 25e9},
      {"H100", 989e12, 3350e9, 80 * kGiB, 50e9},
      {"H200", 989e12, 4800e9, 141 * kGiB, 50e9},
  };
  return *gpus;
}

ModelShape Opt(const char* name, int64_t layers, int64_t hidden, int64_t heads) {
  return {.name = name,
          .num_layers = layers,
          .hidden = hidden,
          .num_heads = heads,
          .num_kv_heads = heads,
          .ffn = 4 * hidden,
          .gated_ffn = false,
          .vocab = 50272,
          .max_len = 2048,
          .tied_embeddings = true,
          .learned_positions = true};
}

ModelShape Llama(const char* name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                 int64_t ffn, int64_t vocab, int64_t max_len) {
  return {.name = name,
          .num_layers = layers,
          .hidden = hidden,
          .num_heads = heads,
          .num_kv_heads = kv_heads,
          .ffn = ffn,
          .gated_ffn = true,
          .vocab = vocab,
          .max_len = max_len,
          .tied_embeddings = false,
          .learned_positions = false};
}

const std::vector<ModelShape>& Models() {
  static const auto* models = new std::vector<ModelShape>{
      Opt("OPT-13B", 40, 5120, 40),
      Opt("OPT-66B", 64, 9216, 72),
      Opt("OPT-175B", 96, 12288, 96),
      Llama("Llama-2-7B", 32, 4096, 32, 32, 11008, 32000, 4096),
      Llama("Llama-2-13B", 40, 5120, 40, 40, 13824, 32000, 4096),
      Llama("Llama-3-8B", 32, 4096, 32, 8, 14336, 128256, 8192),
  };
  return *models;
}

template <typename T>
absl::StatusOr<T> Lookup(const std::vector<T>& table, const std::string& name, const char* what) {
  std::vector<std::string> names;
  for (const T& t : table) {
    if (absl::AsciiStrToLower(t.name) == absl::AsciiStrToLower(name)) return t;
    names.push_back(t.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown ", what, " '", name, "'; known: ", absl::StrJoin(names, ", ")));
}

}  // namespace

int64_t ModelShape::NonEmbeddingParams() const {
  const int64_t attention = 2 * hidden * hidden + 2 * hidden * kv_dim();  // q, o + k, v
  const int64_t mlp = (gated_ffn ? 3 : 2) * hidden * ffn;
  return num_layers * (attention + mlp);
}

int64_t ModelShape::TotalParams() const {
  const int64_t embeddings = vocab * hidden * (tied_embeddings ? 1 : 2);
  return NonEmbeddingParams() + embeddings + (learned_positions ? max_len * hidden : 0);
}

absl::StatusOr<GpuSpec> LookupGpu(const std::string& name) { return Lookup(Gpus(), name, "GPU"); }

absl::StatusOr<ModelShape> LookupModel(const std::string& name) {
  return Lookup(Models(), name, "model shape");
}

std::vector<std::string> KnownGpus() {
  std::vector<std::string> out;
  for (const GpuSpec& g : Gpus()) out.push_back(g.name);
  return out;
}

std::vector<std::string> KnownModels() {
  std::vector<std::string> out;
  for (const ModelShape& m : Models()) out.push_back(m.name);
  return out;
}

}  // namespace pagellm::sim
