// Shared by the pack-pattern harnesses: error check, deterministic inputs, the judge's tolerance.
#pragma once
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess) {                                                            \
      std::printf("FAIL: %s -> %s\n", #call, cudaGetErrorString(err_));                   \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

#define CHECK_MAP(call)                                                                   \
  do {                                                                                    \
    CUresult res_ = (call);                                                               \
    if (res_ != CUDA_SUCCESS) {                                                           \
      std::printf("FAIL: %s -> CUresult %d\n", #call, int(res_));                         \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

// bf16 values in [-amp, amp) and their exact float copies (the reference computes on those).
inline void fill_bf16(std::vector<__nv_bfloat16>& dev, std::vector<float>& host, uint32_t seed, float amp) {
  for (size_t i = 0; i < dev.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    const float x = amp * (static_cast<float>((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f);
    dev[i] = __float2bfloat16(x);
    host[i] = __bfloat162float(dev[i]);
  }
}

// The judge's rule: an element fails when |err| > 1e-2 and |err| > 1e-2 |ref|; NaN always fails.
struct Tally {
  long failures = 0, checked = 0;
  double max_abs = 0.0;
  void add(double got, double ref) {
    const double err = std::fabs(got - ref);
    ++checked;
    if (!(err <= 1e-2 || err <= 1e-2 * std::fabs(ref))) ++failures;
    if (std::isnan(err) || err > max_abs) max_abs = std::isnan(err) ? INFINITY : err;
  }
};

inline bool is_hopper() {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  return prop.major == 9;
}
