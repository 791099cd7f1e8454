// Test helpers for CUDA code: skip without a device, device arrays that upload, download and
// poison themselves, bf16/fp16 host conversion, and the relative error the kernel tests bound
// (||got - want|| / ||want||, METHOD.md's measure). Test-only; not thread-safe.
#ifndef PAGELLM_KERNELS_CUDA_TESTING_CUDA_TEST_UTIL_H_
#define PAGELLM_KERNELS_CUDA_TESTING_CUDA_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "gtest/gtest.h"
#include "kernels/paged_kv.h"

namespace pagellm::kernels::cuda::testing {

inline bool HasCudaDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define PAGELLM_SKIP_WITHOUT_CUDA()                            \
  do {                                                         \
    if (!::pagellm::kernels::cuda::testing::HasCudaDevice()) { \
      GTEST_SKIP() << "no CUDA device";                        \
    }                                                          \
  } while (0)

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(expr)

// Host values of a 16-bit (or fp32) device type.
inline float ToHost(KvDtype t, uint16_t bits) {
  return t == KvDtype::kBF16 ? Bf16ToFloat(bits) : HalfToFloat(bits);
}
inline uint16_t FromHost(KvDtype t, float v) {
  return t == KvDtype::kBF16 ? FloatToBf16(v) : FloatToHalf(v);
}
// v rounded to the device type and back: what the kernels see as input.
inline float Rounded(KvDtype t, float v) { return ToHost(t, FromHost(t, v)); }

// Device memory of n elements of T, freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (cudaMalloc(&ptr_, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(host.size(), n_);
    ASSERT_EQ(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  // Every byte 0xFF: NaN in fp32, bf16 and fp16, so an element a kernel failed to write shows.
  void Poison() { ASSERT_EQ(cudaMemset(ptr_, 0xFF, n_ * sizeof(T)), cudaSuccess); }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

// Normal(0, 1) values, rounded to `t` when given.
inline std::vector<float> RandomValues(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> ToDeviceBits(KvDtype t, const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = FromHost(t, v[i]);
  return bits;
}

inline std::vector<float> FromDeviceBits(KvDtype t, const std::vector<uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = ToHost(t, bits[i]);
  return v;
}

// ||got - want|| / ||want||; infinity when got holds a NaN.
inline double RelativeError(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// bf16 operands: METHOD.md's band is 1e-3 .. 1e-2.
inline constexpr double kHalfTolerance = 1e-2;

}  // namespace pagellm::kernels::cuda::testing

#endif  // PAGELLM_KERNELS_CUDA_TESTING_CUDA_TEST_UTIL_H_
