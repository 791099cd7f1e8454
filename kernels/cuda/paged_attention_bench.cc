// Paged decode attention alone on the GPU, against the copy bandwidth measured in the same run
// (issue 10: >= 80% of it at 4k+ contexts). For each (batch, context): K/V of every sequence in
// its own shuffled blocks (fresh random values, several times the L2), one query token per
// sequence, timed with CUDA events over repeated launches (median); the bytes counted are the
// K/V the step must read once (batch x context x 2 x kv_heads x head_dim x 2 B). Prints one JSON
// line per shape and a summary line.
//
// Usage: kernels_cuda_paged_attention_bench [--heads 32 --kv-heads 8 --head-dim 128]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/paged_attention.h"

namespace pagellm::kernels::cuda {
namespace {

#define CHECK_CUDA(expr)                                              \
  do {                                                                \
    const cudaError_t e = (expr);                                     \
    if (e != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e)); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

float MedianMs(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bytes read + written per second by a 2 GiB device-to-device copy.
double CopyBandwidth() {
  const size_t bytes = 2ull << 30;
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(LaunchFillUniform(a, KvDtype::kBF16, bytes / 2, 3, 1.0f, nullptr));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 13; ++i) {
    CHECK_CUDA(cudaEventRecord(e0));
    CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3) ms.push_back(t);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (MedianMs(ms) * 1e-3);
}

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

int Main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("{\"skipped\": \"no CUDA device\"}\n");
    return 0;
  }
  const int heads = Arg(argc, argv, "--heads", 32), kv_heads = Arg(argc, argv, "--kv-heads", 8);
  const int d = Arg(argc, argv, "--head-dim", 128), bs = 16;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const double bw = CopyBandwidth();
  std::mt19937 rng(1);
  double worst_long = 1e9;
  struct Shape {
    int batch, context;
  };
  for (Shape s : {Shape{1, 4096}, Shape{1, 16384}, Shape{1, 32768}, Shape{16, 4096},
                  Shape{64, 4096}, Shape{64, 1024}, Shape{256, 1024}}) {
    const int64_t per = (s.context + bs - 1) / bs, blocks = s.batch * per;
    PagedKvLayer kv;
    kv.dtype = KvDtype::kBF16;
    kv.block_size = bs;
    kv.num_kv_heads = kv_heads;
    kv.head_dim = d;
    const int64_t elems = blocks * kv.shape().block_elems();
    CHECK_CUDA(cudaMalloc(&kv.k, elems * 2));
    CHECK_CUDA(cudaMalloc(&kv.v, elems * 2));
    CHECK_CUDA(LaunchFillUniform(kv.k, KvDtype::kBF16, elems, 5, 1.0f, nullptr));
    CHECK_CUDA(LaunchFillUniform(kv.v, KvDtype::kBF16, elems, 6, 1.0f, nullptr));
    std::vector<int32_t> ids(blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> seq(s.batch), pos(s.batch, s.context - 1);
    std::iota(seq.begin(), seq.end(), 0);
    void *q, *out, *tables, *d_seq, *d_pos;
    const int64_t q_stride = (heads + 2 * kv_heads) * d;
    CHECK_CUDA(cudaMalloc(&q, s.batch * q_stride * 2));
    CHECK_CUDA(cudaMalloc(&out, s.batch * heads * d * 2));
    CHECK_CUDA(LaunchFillUniform(q, KvDtype::kBF16, s.batch * q_stride, 7, 1.0f, nullptr));
    CHECK_CUDA(cudaMalloc(&tables, ids.size() * 4));
    CHECK_CUDA(cudaMalloc(&d_seq, seq.size() * 4));
    CHECK_CUDA(cudaMalloc(&d_pos, pos.size() * 4));
    CHECK_CUDA(cudaMemcpy(tables, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_seq, seq.data(), seq.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_pos, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
    PagedAttentionParams p;
    p.q = q;
    p.q_stride = q_stride;
    p.out = out;
    p.out_stride = heads * d;
    p.kv = kv;
    p.token_seq = static_cast<int32_t*>(d_seq);
    p.positions = static_cast<int32_t*>(d_pos);
    p.block_tables = static_cast<int32_t*>(tables);
    p.block_table_stride = per;
    p.num_tokens = s.batch;
    p.num_heads = heads;
    p.scale = 0.0883883f;
    p.plan =
        PlanPagedAttention(s.batch, heads, kv_heads, s.context, prop.multiProcessorCount, 4096);
    void* ws = nullptr;
    const int64_t ws_floats = PagedAttentionWorkspaceFloats(s.batch, heads, d, p.plan.num_splits);
    if (ws_floats > 0) CHECK_CUDA(cudaMalloc(&ws, ws_floats * 4));
    p.workspace = static_cast<float*>(ws);
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < 25; ++i) {
      CHECK_CUDA(cudaEventRecord(e0));
      CHECK_CUDA(LaunchPagedAttention(p, nullptr));
      CHECK_CUDA(cudaEventRecord(e1));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float t;
      CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 5) ms.push_back(t);
    }
    const double t = MedianMs(ms) * 1e-3;
    const double bytes = 2.0 * s.batch * s.context * kv_heads * d * 2;
    const double of_copy = bytes / t / bw;
    if (s.context >= 4096) worst_long = std::min(worst_long, of_copy);
    std::printf(
        "{\"batch\": %d, \"context\": %d, \"splits\": %d, \"us\": %.1f, \"gb_s\": %.0f, "
        "\"of_copy_bandwidth\": %.3f}\n",
        s.batch, s.context, p.plan.num_splits, t * 1e6, bytes / t / 1e9, of_copy);
    for (void* ptr : {kv.k, kv.v, q, out, tables, d_seq, d_pos, ws}) cudaFree(ptr);
  }
  std::printf("{\"copy_bandwidth_gb_s\": %.0f, \"worst_of_copy_at_4k_plus\": %.3f}\n", bw / 1e9,
              worst_long);
  return 0;
}

}  // namespace
}  // namespace pagellm::kernels::cuda

int main(int argc, char** argv) { return pagellm::kernels::cuda::Main(argc, argv); }
