#include "kernels/cuda/rms_norm.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"

namespace pagellm::kernels::cuda {
namespace {

TEST(CudaRmsNormTest, MatchesCpuKernel) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 7, dim = 576;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> x(rows * dim), w(dim), want(rows * dim), got(rows * dim);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  kernels::RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, want.data());
  float *dx, *dw;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dw, w.size() * 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
  ASSERT_EQ(LaunchRmsNorm(dx, dw, rows, dim, 1e-5f, dx, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), dx, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dw);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * std::fabs(want[i]) + 1e-5f);
}

}  // namespace
}  // namespace pagellm::kernels::cuda
