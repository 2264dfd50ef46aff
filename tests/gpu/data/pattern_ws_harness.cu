// Runs the kernel of knowledge_packs/hopper/patterns/warp_specialization.md (the test extracts its
// ```cuda block into pattern_kernel.cuh) on a Hopper GPU: a persistent grid of 2 CTAs walks 6 tiles
// of a 384x512x1024 bf16 GEMM, so the barrier ring runs on across tiles. Compared with a CPU
// reference under the judge's rule (fail if |err| > 1e-2 and |err|/|ref| > 1e-2). Prints PASS or FAIL.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

#include "pattern_kernel.cuh"

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess) {                                                            \
      std::printf("FAIL: %s -> %s\n", #call, cudaGetErrorString(err_));                   \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main() {
  constexpr int M = 384, N = 512, K = 1024;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9) {
    std::printf("FAIL: needs a Hopper GPU (sm_90)\n");
    return 1;
  }
  std::vector<float> af(size_t(M) * K), bf(size_t(N) * K);
  std::vector<__nv_bfloat16> a(af.size()), b(bf.size());
  uint32_t seed = 7u;
  auto next = [&seed]() {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  };
  for (size_t i = 0; i < af.size(); ++i) { a[i] = __float2bfloat16(next()); af[i] = __bfloat162float(a[i]); }
  for (size_t i = 0; i < bf.size(); ++i) { b[i] = __float2bfloat16(next()); bf[i] = __bfloat162float(b[i]); }

  __nv_bfloat16 *da, *db, *dc;
  CHECK_CUDA(cudaMalloc(&da, a.size() * 2));
  CHECK_CUDA(cudaMalloc(&db, b.size() * 2));
  CHECK_CUDA(cudaMalloc(&dc, size_t(M) * N * 2));
  CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dc, 0xFF, size_t(M) * N * 2));  // NaN until written

  CUtensorMap map_a, map_b;
  CUresult ra = make_tmap_2d(&map_a, da, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, K, M, K * 2, 64, 128,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  CUresult rb = make_tmap_2d(&map_b, db, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, K, N, K * 2, 64, 128,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  if (ra != CUDA_SUCCESS || rb != CUDA_SUCCESS) {
    std::printf("FAIL: cuTensorMapEncodeTiled returned %d %d\n", int(ra), int(rb));
    return 1;
  }
  CHECK_CUDA(cudaFuncSetAttribute(gemm_ws, cudaFuncAttributeMaxDynamicSharedMemorySize, WS_SMEM_BYTES));
  gemm_ws<<<2, 384, WS_SMEM_BYTES>>>(map_a, map_b, dc, M, N, K);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<__nv_bfloat16> c(size_t(M) * N);
  CHECK_CUDA(cudaMemcpy(c.data(), dc, c.size() * 2, cudaMemcpyDeviceToHost));
  long failures = 0;
  double max_abs = 0.0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k) ref += double(af[size_t(i) * K + k]) * double(bf[size_t(j) * K + k]);
      const double got = double(__bfloat162float(c[size_t(i) * N + j]));
      const double err = std::fabs(got - ref);
      if (!(err <= 1e-2 || err <= 1e-2 * std::fabs(ref))) ++failures;  // NaN counts as a failure
      if (err > max_abs || std::isnan(err)) max_abs = err;
    }
  }
  std::printf("M=%d N=%d K=%d grid=2 (3 tiles per CTA)  max_abs_err=%.3e  failing elements=%ld\n", M, N, K,
              max_abs, failures);
  std::printf("%s\n", failures == 0 ? "PASS" : "FAIL");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return failures == 0 ? 0 : 1;
}
