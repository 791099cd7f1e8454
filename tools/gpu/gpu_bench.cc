// pagellm-gpu-bench: the CUDA backend's step times on the GPU against their physical floors,
// for tools/gpu/check.sh. In one run:
//   - the ceilings, measured here: device-to-device copy bandwidth (bytes read + written) and
//     the bf16 GEMM rate of an 8192^3 cuBLAS product on random data (--copy-mib and --gemm-n
//     shrink both for a rehearsal on the CUDA emulator: check.sh emu);
//   - decode: a step of B sequences of --context tokens each (B from --decode-batches), through
//     Backend::Forward with greedy sampling rows, as the engine runs it; floor = (weight bytes +
//     the KV bytes the step reads) / copy bandwidth;
//   - prefill: one --prefill-tokens prompt in one step; floor = its FLOPs / GEMM rate.
// Decode sequences hold real K/V: one sequence is prefilled, and its blocks are copied to the
// others with Backend::CopyKv. Prints one JSON object (and writes it to --json).
//
// Usage: pagellm-gpu-bench --load-format dummy --dummy-model llama-3-8b --dummy-dtype bf16
//          --device cuda [--decode-batches 1,64,256] [--context 1024] [--prefill-tokens 2048]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags_util.h"
#include "common/status_macros.h"
#include "kernels/cuda/elementwise.h"
#include "nlohmann/json.hpp"
#include "worker/backend/cuda/cublas_api.h"
#include "worker/backend/cuda/device_memory.h"
#include "worker/backend/step_arrays.h"
#include "worker/flags/open_from_flags.h"

ABSL_FLAG(std::string, decode_batches, "1,64,256", "decode batch sizes");
ABSL_FLAG(int32_t, context, 1024, "tokens of context per decode sequence");
ABSL_FLAG(int32_t, prefill_tokens, 2048, "tokens of the prefill prompt");
ABSL_FLAG(int32_t, iters, 20, "timed steps per measurement (after 3 warm-up steps)");
ABSL_FLAG(std::string, json, "", "also write the result here");
ABSL_FLAG(int32_t, copy_mib, 2048,
          "MiB per buffer of the copy ceiling (two buffers; less where less is free)");
ABSL_FLAG(int32_t, gemm_n, 8192, "n of the n^3 GEMM ceiling (small on the CUDA emulator)");

namespace pagellm::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The bytes per buffer of the copy ceiling: --copy_mib, or less where the backend left less
// free (it has taken --gpu-memory-utilization of the device: on an 80 GB card at 0.9, about
// 7 GB are left). A quarter of the free memory each, so that the GEMM's buffers and cuBLAS's
// workspace fit beside them; at least 256 MiB, far past every cache.
absl::StatusOr<int64_t> CopyBytes() {
  const int64_t asked = int64_t{absl::GetFlag(FLAGS_copy_mib)} << 20;
  if (asked <= 0) return absl::InvalidArgumentError("--copy_mib must be positive");
  size_t free = 0, total = 0;
  RETURN_IF_ERROR(cuda::CudaStatus(cudaMemGetInfo(&free, &total), "reading free device memory"));
  const int64_t fit = static_cast<int64_t>(free / 4) >> 20 << 20;
  return std::min(asked, std::max<int64_t>(fit, 256 << 20));
}

// Bytes read + written per second by a large device-to-device copy of `bytes` (median of 10).
absl::StatusOr<double> CopyBandwidth(int64_t bytes) {
  ASSIGN_OR_RETURN(cuda::DeviceBuffer a, cuda::DeviceBuffer::Allocate(bytes, "copy benchmark"));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::Allocate(bytes, "copy benchmark"));
  RETURN_IF_ERROR(
      cuda::CudaStatus(kernels::cuda::LaunchFillUniform(a.get(), kernels::KvDtype::kBF16, bytes / 2,
                                                        1, 1.0f, nullptr),
                       "fill"));
  std::vector<double> s;
  for (int i = 0; i < 13; ++i) {
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(
        cuda::CudaStatus(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice), "copy"));
    RETURN_IF_ERROR(cuda::CudaStatus(cudaDeviceSynchronize(), "copy"));
    if (i >= 3) s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * bytes / Median(s);
}

// FLOP/s of an n^3 bf16 GEMM with fp32 accumulation on random data (median of 10).
absl::StatusOr<double> GemmRate() {
  const int n = absl::GetFlag(FLAGS_gemm_n);
  if (n < 16 || n > 65536) return absl::InvalidArgumentError("--gemm_n must be in [16, 65536]");
  ASSIGN_OR_RETURN(const cuda::CublasApi* api, cuda::LoadCublas());
  ASSIGN_OR_RETURN(cuda::DeviceBuffer a, cuda::DeviceBuffer::Allocate(2ll * n * n, "GEMM"));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::Allocate(2ll * n * n, "GEMM"));
  ASSIGN_OR_RETURN(cuda::DeviceBuffer c, cuda::DeviceBuffer::Allocate(2ll * n * n, "GEMM"));
  for (auto* buf : {&a, &b}) {
    RETURN_IF_ERROR(
        cuda::CudaStatus(kernels::cuda::LaunchFillUniform(buf->get(), kernels::KvDtype::kBF16,
                                                          1ll * n * n, 7, 1.0f, nullptr),
                         "fill"));
  }
  cublasHandle_t h;
  if (api->create(&h) != CUBLAS_STATUS_SUCCESS) return absl::InternalError("cublasCreate");
  const float one = 1.0f, zero = 0.0f;
  std::vector<double> s;
  for (int i = 0; i < 13; ++i) {
    const auto t0 = Clock::now();
    if (const cublasStatus_t st =
            api->gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a.get(), CUDA_R_16BF, n,
                         b.get(), CUDA_R_16BF, n, &zero, c.get(), CUDA_R_16BF, n,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        st != CUBLAS_STATUS_SUCCESS) {
      api->destroy(h);
      return absl::InternalError(absl::StrCat("cublasGemmEx: status ", static_cast<int>(st)));
    }
    RETURN_IF_ERROR(cuda::CudaStatus(cudaDeviceSynchronize(), "GEMM"));
    if (i >= 3) s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  api->destroy(h);
  return 2.0 * n * n * n / Median(s);
}

// A step of `seqs` rows, each appending `tokens` tokens to a sequence that holds `cached`
// tokens; row s owns blocks [s * per, (s + 1) * per) with per = blocks for cached + tokens.
StepArrays MakeStep(int64_t seqs, int64_t cached, int64_t tokens, int64_t bs, int64_t stride) {
  const int64_t per = (cached + tokens + bs - 1) / bs;
  StepArrays step(bs, stride);
  std::vector<int32_t> ids(tokens), blocks(per);
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t i = 0; i < tokens; ++i)
      ids[i] = static_cast<int32_t>((s * 131 + i * 7) % 1000 + 10);
    for (int64_t b = 0; b < per; ++b) blocks[b] = static_cast<int32_t>(s * per + b);
    step.AddRow(ids, cached, blocks);
  }
  return step;
}

// Median seconds of `fn` over --iters runs after 3 warm-ups.
template <typename F>
absl::StatusOr<double> Time(F fn) {
  std::vector<double> s;
  const int iters = std::max(1, absl::GetFlag(FLAGS_iters));
  for (int i = 0; i < 3 + iters; ++i) {
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(fn());
    if (i >= 3) s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return Median(s);
}

absl::Status Run() {
  ASSIGN_OR_RETURN(OpenedModel model, OpenModelFromFlags());
  Backend& be = *model.backend;
  const ModelConfig& c = be.config();
  const int64_t bs = be.block_size();
  const int64_t stride = (c.max_position_embeddings + bs - 1) / bs;
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const double matrix_params = static_cast<double>(c.num_layers) *
                                   (c.hidden_size * (q_dim + 2 * kv_dim) + q_dim * c.hidden_size +
                                    3.0 * c.hidden_size * c.intermediate_size) +
                               static_cast<double>(c.vocab_size) * c.hidden_size;
  // Resident: the embedding table, plus the LM head when it is not tied to it. Read by a decode
  // step: every layer's matrices and the LM head, but only the batch's rows of the embedding
  // table, so matrix_params (which counts vocab x hidden once) whether tied or not.
  const double weight_bytes =
      2.0 * (matrix_params +
             (c.tie_word_embeddings ? 0.0 : static_cast<double>(c.vocab_size) * c.hidden_size));
  const double step_weight_bytes = 2.0 * matrix_params;
  const double kv_bytes_per_token = 2.0 * c.num_layers * kv_dim * 2;

  nlohmann::json out;
  ASSIGN_OR_RETURN(const int64_t copy_bytes, CopyBytes());
  ASSIGN_OR_RETURN(const double bw, CopyBandwidth(copy_bytes));
  ASSIGN_OR_RETURN(const double gemm, GemmRate());
  out["copy_mib"] = copy_bytes >> 20;
  out["copy_bandwidth_gbs"] = bw / 1e9;
  out["gemm_bf16_tflops"] = gemm / 1e12;
  out["weight_gib"] = weight_bytes / (1ull << 30);

  const int64_t ctx = absl::GetFlag(FLAGS_context);
  std::vector<int32_t> eos;
  std::vector<SamplingRow> rows;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 1 << 20;
  greedy.ignore_eos = true;
  SamplerOutput sampled;
  for (absl::string_view b_str : absl::StrSplit(absl::GetFlag(FLAGS_decode_batches), ',')) {
    int64_t b = 0;
    if (!absl::SimpleAtoi(b_str, &b) || b <= 0)
      return absl::InvalidArgumentError("--decode-batches");
    const int64_t per = (ctx + bs - 1) / bs;
    if (b * per > be.num_kv_blocks() || b > be.max_batch_tokens()) {
      out["decode"].push_back({{"batch", b}, {"skipped", "does not fit the KV pool"}});
      continue;
    }
    // Prefill sequence 0 (context - 1 tokens) in chunks, then copy its blocks to the others.
    for (int64_t done = 0; done < ctx - 1;) {
      const int64_t n = std::min<int64_t>(be.max_batch_tokens(), ctx - 1 - done);
      const StepArrays p = MakeStep(1, done, n, bs, stride);
      std::vector<float> logits(c.vocab_size);
      RETURN_IF_ERROR(be.ForwardLogits(p.batch(), logits.data()));
      done += n;
    }
    std::vector<KvCopy> copies;
    for (int64_t s = 1; s < b; ++s) {
      for (int64_t k = 0; k < per; ++k) {
        copies.push_back({KvCopy::Kind::kDeviceToDevice, static_cast<int32_t>(k),
                          static_cast<int32_t>(s * per + k)});
      }
    }
    RETURN_IF_ERROR(be.CopyKv(copies));
    const StepArrays d = MakeStep(b, ctx - 1, 1, bs, stride);
    const ForwardBatch decode = d.batch();
    rows.assign(b, SamplingRow{});
    for (int64_t s = 0; s < b; ++s) {
      rows[s].logits_row = static_cast<int32_t>(s);
      rows[s].seq.params = &greedy;
    }
    SamplingBatch sb{absl::MakeConstSpan(rows), absl::MakeConstSpan(eos)};
    ASSIGN_OR_RETURN(const double t, Time([&] { return be.Forward(decode, sb, &sampled); }));
    const double floor = (step_weight_bytes + b * ctx * kv_bytes_per_token) / bw;
    out["decode"].push_back({{"batch", b},
                             {"context", ctx},
                             {"step_ms", t * 1e3},
                             {"tok_s", b / t},
                             {"floor_ms", floor * 1e3},
                             {"of_floor", floor / t}});
  }

  const int64_t p = absl::GetFlag(FLAGS_prefill_tokens);
  if (p <= be.max_batch_tokens() && (p + bs - 1) / bs <= be.num_kv_blocks()) {
    const StepArrays s = MakeStep(1, 0, p, bs, stride);
    const ForwardBatch prefill = s.batch();
    std::vector<float> logits(c.vocab_size);
    ASSIGN_OR_RETURN(const double t,
                     Time([&] { return be.ForwardLogits(prefill, logits.data()); }));
    // Matrix FLOPs plus causal attention (QK^T and PV over p^2 / 2 pairs per head and layer).
    const double flops =
        2.0 * p * (matrix_params - static_cast<double>(c.vocab_size) * c.hidden_size) +
        2.0 * c.vocab_size * c.hidden_size +
        4.0 * c.num_layers * q_dim * (static_cast<double>(p) * p / 2);
    out["prefill"] = {{"tokens", p},
                      {"ms", t * 1e3},
                      {"tok_s", p / t},
                      {"floor_ms", flops / gemm * 1e3},
                      {"of_floor", flops / gemm / t}};
  }
  std::printf("%s\n", out.dump().c_str());
  if (!absl::GetFlag(FLAGS_json).empty()) std::ofstream(absl::GetFlag(FLAGS_json)) << out.dump(2);
  return absl::OkStatus();
}

}  // namespace
}  // namespace pagellm::cli

int main(int argc, char** argv) {
  pagellm::cli::ParseFlags(argc, argv);
  const absl::Status s = pagellm::cli::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "pagellm-gpu-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
