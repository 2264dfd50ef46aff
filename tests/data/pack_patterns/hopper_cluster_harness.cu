// Runs the kernel of knowledge_packs/hopper/patterns/cluster_multicast.md (the test writes the epilogue
// chapter's code and the kernel, accumulators poisoned, to pattern_kernel.cuh) on a Hopper GPU: a
// 512x512x1024 bf16 GEMM, 4 clusters of 2 CTAs, 16 k-tiles through the 3-stage ring, C through the
// stmatrix + TMA-store epilogue into a NaN-filled buffer. Prints PASS or FAIL.
#include "harness_common.cuh"
#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

#include "pattern_kernel.cuh"

int main() {
  constexpr int M = 512, N = 512, K = 1024;
  if (!is_hopper()) {
    std::printf("FAIL: needs a Hopper GPU (sm_90)\n");
    return 1;
  }
  std::vector<__nv_bfloat16> a(size_t(M) * K), b(size_t(N) * K), c(size_t(M) * N);
  std::vector<float> af(a.size()), bf(b.size());
  fill_bf16(a, af, 11u, 1.0f);
  fill_bf16(b, bf, 29u, 1.0f);
  __nv_bfloat16 *da, *db, *dc;
  CHECK_CUDA(cudaMalloc(&da, a.size() * 2));
  CHECK_CUDA(cudaMalloc(&db, b.size() * 2));
  CHECK_CUDA(cudaMalloc(&dc, c.size() * 2));
  CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dc, 0xFF, c.size() * 2));  // NaN until written
  CUtensorMap map_a, map_b, map_c;
  CHECK_MAP(make_tmap_2d(&map_a, da, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, K, M, K * 2, 64, 128, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_MAP(make_tmap_2d(&map_b, db, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, K, N, K * 2, 64, 128, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_MAP(make_tmap_2d(&map_c, dc, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, N, M, N * 2, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_CUDA(cudaFuncSetAttribute(gemm_cluster, cudaFuncAttributeMaxDynamicSharedMemorySize, MC_SMEM_BYTES));
  gemm_cluster<<<dim3(M / 128, N / 256), 384, MC_SMEM_BYTES>>>(map_a, map_b, map_c, K);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(c.data(), dc, c.size() * 2, cudaMemcpyDeviceToHost));
  Tally tally;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k) ref += double(af[size_t(i) * K + k]) * double(bf[size_t(j) * K + k]);
      tally.add(double(__bfloat162float(c[size_t(i) * N + j])), ref);
    }
  std::printf("M=%d N=%d K=%d smem=%u B  max_abs_err=%.3e  failing=%ld of %ld\n", M, N, K, MC_SMEM_BYTES,
              tally.max_abs, tally.failures, tally.checked);
  std::printf("%s\n", tally.failures == 0 ? "PASS" : "FAIL");
  return tally.failures == 0 ? 0 : 1;
}
