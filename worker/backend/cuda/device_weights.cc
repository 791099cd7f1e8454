// Layout first (every tensor's offset in one allocation, 256-byte aligned, merged matrices as
// consecutive row ranges), then one pass over the plan: a tensor already in its device type and
// contiguous is one copy; anything else streams through a pinned staging buffer in row batches,
// is copied raw (float types) or as fp32 (quantized blocks, dequantized on the host) to a
// device scratch buffer and converted there into place.
#include "worker/backend/cuda/device_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/ggml_type.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cuda/elementwise.h"

namespace pagellm::cuda {
namespace {

using kernels::KvDtype;

constexpr int64_t kAlign = 256;
constexpr int64_t kStagingBytes = 64ll << 20;

int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

bool IsFloatType(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

KvDtype ToKvDtype(GgmlType t) {
  if (t == GgmlType::kF32) return KvDtype::kF32;
  if (t == GgmlType::kF16) return KvDtype::kF16;
  return KvDtype::kBF16;
}

// FNV-1a: a tensor's generator stream, stable across builds.
uint64_t NameHash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Fills a generated tensor as MakeDummyCheckpoint would: matrices uniform in +-1/sqrt(n_in),
// norms 1, biases 0.01.
absl::Status GenerateTensor(const CudaUploadEntry& e, uint64_t seed, void* dst,
                            cudaStream_t stream) {
  const int64_t n = e.shard.num_elements();
  const KvDtype t = ToKvDtype(e.device_dtype);
  cudaError_t err;
  if (e.shard.shape.size() == 1) {
    const bool bias = e.name.size() > 5 && e.name.compare(e.name.size() - 5, 5, ".bias") == 0;
    err = kernels::cuda::LaunchFillConstant(dst, t, n, bias ? 0.01f : 1.0f, stream);
  } else {
    const int64_t fan_in = e.fan_in > 0 ? e.fan_in : e.shard.shape[1];
    const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
    err = kernels::cuda::LaunchFillUniform(dst, t, n, seed ^ NameHash(e.name), scale, stream);
  }
  return CudaStatus(err, absl::StrCat("generating ", e.name));
}

// Copies one tensor's shard to `dst` in the entry's device type.
absl::Status UploadTensor(const CudaUploadEntry& e, void* dst, PinnedBuffer& staging,
                          DeviceBuffer& scratch, cudaStream_t stream) {
  const TensorView& v = e.shard;
  const int64_t rows = v.num_rows(), cols = v.shape.back();
  if (v.dtype == e.device_dtype && v.contiguous()) {
    return CudaStatus(cudaMemcpy(dst, v.data, v.row_bytes() * rows, cudaMemcpyHostToDevice),
                      absl::StrCat("uploading ", e.name));
  }
  const bool raw = IsFloatType(v.dtype);
  const KvDtype src_type = raw ? ToKvDtype(v.dtype) : KvDtype::kF32;
  const int64_t src_row_bytes = cols * kernels::KvDtypeBytes(src_type);
  const int64_t dst_row_bytes = cols * kernels::KvDtypeBytes(ToKvDtype(e.device_dtype));
  const int64_t batch = std::max<int64_t>(1, kStagingBytes / src_row_bytes);
  if (src_row_bytes > kStagingBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", e.name, ": rows too long"));
  }
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t n = std::min(batch, rows - r0);
    uint8_t* host = staging.as<uint8_t>();
    for (int64_t r = 0; r < n; ++r) {
      if (raw) {
        std::memcpy(host + r * src_row_bytes, v.row(r0 + r), src_row_bytes);
      } else {
        RETURN_IF_ERROR(kernels::DequantizeRow(
            v.dtype, v.row(r0 + r), reinterpret_cast<float*>(host + r * src_row_bytes), cols));
      }
    }
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(scratch.get(), host, n * src_row_bytes, cudaMemcpyHostToDevice, stream),
        absl::StrCat("uploading ", e.name)));
    RETURN_IF_ERROR(
        CudaStatus(kernels::cuda::LaunchConvert(scratch.get(), src_type, n * cols,
                                                static_cast<uint8_t*>(dst) + r0 * dst_row_bytes,
                                                ToKvDtype(e.device_dtype), stream),
                   absl::StrCat("converting ", e.name)));
    // The staging buffer is refilled next: wait for this batch.
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), absl::StrCat("uploading ", e.name)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceWeights>> UploadWeights(const ModelCheckpoint& checkpoint,
                                                             const CudaUploadPlan& plan,
                                                             cudaStream_t stream) {
  const ModelConfig& c = checkpoint.config;
  absl::flat_hash_map<std::string, const CudaUploadEntry*> by_name;
  for (const CudaUploadEntry& e : plan.tensors) by_name[e.name] = &e;

  // Offsets: each name, or each merged group's members back to back.
  absl::flat_hash_map<std::string, int64_t> offset;
  int64_t total = 0;
  auto place = [&](std::initializer_list<std::string> group) -> absl::Status {
    int64_t at = total;
    for (const std::string& name : group) {
      auto it = by_name.find(name);
      if (it == by_name.end())
        return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
      offset[name] = at;
      at += it->second->device_bytes;
    }
    total = AlignUp(at);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(place({"model.embed_tokens.weight"}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto n = [i](const char* suffix) { return LlamaTensorName(i, suffix); };
    RETURN_IF_ERROR(place({n("self_attn.q_proj.weight"), n("self_attn.k_proj.weight"),
                           n("self_attn.v_proj.weight")}));
    if (c.attention_bias) {
      RETURN_IF_ERROR(place(
          {n("self_attn.q_proj.bias"), n("self_attn.k_proj.bias"), n("self_attn.v_proj.bias")}));
    }
    RETURN_IF_ERROR(place({n("self_attn.o_proj.weight")}));
    RETURN_IF_ERROR(place({n("mlp.gate_proj.weight"), n("mlp.up_proj.weight")}));
    RETURN_IF_ERROR(place({n("mlp.down_proj.weight")}));
    RETURN_IF_ERROR(place({n("input_layernorm.weight")}));
    RETURN_IF_ERROR(place({n("post_attention_layernorm.weight")}));
  }
  RETURN_IF_ERROR(place({"model.norm.weight"}));
  const bool tied = !by_name.contains("lm_head.weight");
  if (!tied) RETURN_IF_ERROR(place({"lm_head.weight"}));

  auto w = std::make_unique<DeviceWeights>();
  ASSIGN_OR_RETURN(w->storage, DeviceBuffer::Allocate(total, "the weights"));
  w->bytes = total;
  uint8_t* base = w->storage.as<uint8_t>();
  ASSIGN_OR_RETURN(PinnedBuffer staging, PinnedBuffer::Allocate(kStagingBytes, "weight staging"));
  ASSIGN_OR_RETURN(DeviceBuffer scratch, DeviceBuffer::Allocate(kStagingBytes, "weight staging"));
  for (const CudaUploadEntry& e : plan.tensors) {
    if (e.name == "rope_freqs.weight") {
      w->rope_freq_factors.resize(e.shard.num_elements());
      RETURN_IF_ERROR(kernels::DequantizeRow(e.shard.dtype, e.shard.data,
                                             w->rope_freq_factors.data(), e.shard.num_elements()));
      continue;
    }
    auto it = offset.find(e.name);
    if (it == offset.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", e.name, " has no place on the GPU"));
    }
    if (e.generated) {
      RETURN_IF_ERROR(GenerateTensor(e, checkpoint.generated->seed, base + it->second, stream));
      continue;
    }
    RETURN_IF_ERROR(UploadTensor(e, base + it->second, staging, scratch, stream));
    w->converted_tensors += e.converted;
    w->dequantized_tensors += GetGgmlTypeTraits(e.shard.dtype).block_elems > 1;
    // The host bytes are not read again (UploadTensor waited for their copy): their pages of a
    // mapped file leave the host's resident set.
    if (checkpoint.drop_pages && e.shard.num_rows() > 0) {
      checkpoint.drop_pages(
          e.shard.data, static_cast<uint64_t>((e.shard.num_rows() - 1) * e.shard.row_stride_bytes +
                                              e.shard.row_bytes()));
    }
  }
  // The whole device: a contiguous tensor went by cudaMemcpy, whose last DMA from pageable
  // memory may still be landing when it returns, on the legacy default stream, which the
  // compute stream (non-blocking) does not wait for.
  RETURN_IF_ERROR(CudaStatus(cudaDeviceSynchronize(), "loading the weights"));
  const CudaUploadEntry* embed = by_name["model.embed_tokens.weight"];
  w->dtype = ToKvDtype(embed->device_dtype);
  auto at = [&](const std::string& name) -> const void* { return base + offset[name]; };
  auto at_f32 = [&](const std::string& name) { return static_cast<const float*>(at(name)); };
  w->vocab_begin = plan.vocab_begin;
  w->vocab_rows = plan.vocab_rows;
  w->embedding = at("model.embed_tokens.weight");
  w->lm_head = tied ? w->embedding : at("lm_head.weight");
  w->final_norm = at_f32("model.norm.weight");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto n = [i](const char* suffix) { return LlamaTensorName(i, suffix); };
    DeviceLayerWeights l;
    l.qkv = at(n("self_attn.q_proj.weight"));
    if (c.attention_bias) l.qkv_bias = at_f32(n("self_attn.q_proj.bias"));
    l.o = at(n("self_attn.o_proj.weight"));
    l.gate_up = at(n("mlp.gate_proj.weight"));
    l.down = at(n("mlp.down_proj.weight"));
    l.attn_norm = at_f32(n("input_layernorm.weight"));
    l.ffn_norm = at_f32(n("post_attention_layernorm.weight"));
    w->layers.push_back(l);
  }
  return w;
}

}  // namespace pagellm::cuda
