// Standalone check of the Hopper pack's attention data path on a real GPU (sm_90a):
// S = Q K^T with SS wgmma (K-major), S converted in registers to bf16 A fragments with the pack's
// accumulator-to-A mapping, then O = P V with RS wgmma and V as an MN-major (trans-b = 1) operand
// through desc_mnmajor_sw128. Inputs are small integers / halves, so every result is exact in fp32
// and bf16: any layout error shows as a non-zero difference. Prints the errors and PASS or FAIL.
//
// Build: nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a \
//          -I knowledge_packs/common/headers -I knowledge_packs/hopper/headers pack_rs_mnmajor.cu
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

constexpr int M = 64;    // query rows (one warpgroup)
constexpr int L = 64;    // keys: the N of S and the K of P V
constexpr int D = 64;    // head dim of Q and K (the K of S)
constexpr int DV = 128;  // head dim of V (the N of P V): two 64-wide MN chunks
constexpr uint32_t TILE = 64 * 64 * 2;              // one 64 x 64 bf16 box, 8 KiB
constexpr uint32_t SMEM_ALLOC = 4 * TILE + 64 + 1024;

// Set when the load barrier never completed. (No printf in the kernel: a function call inside the
// wgmma pipeline makes ptxas serialise the wgmmas.)
__device__ int g_timeout;

__global__ void __launch_bounds__(128, 1)
attention_path(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
               const __grid_constant__ CUtensorMap map_v, float* s_out, float* o_out) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  unsigned char* q_tile = smem;             // [64 rows][64 d], K-major, 128B swizzle
  unsigned char* k_tile = smem + TILE;      // [64 keys][64 d], K-major
  unsigned char* v_tile = smem + 2 * TILE;  // two boxes [64 keys][64 d]: d 0-63, then d 64-127
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + 4 * TILE);
  if (threadIdx.x == 0) {
    mbar_init(bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(bar, 4 * TILE);
    tma_load_2d(q_tile, &map_q, bar, 0, 0);
    tma_load_2d(k_tile, &map_k, bar, 0, 0);
    tma_load_2d(v_tile, &map_v, bar, 0, 0);
    tma_load_2d(v_tile + TILE, &map_v, bar, 64, 0);
  }
  const long long start = clock64();
  while (!mbar_try_wait(bar, 0)) {
    if (clock64() - start > (1ll << 31)) {  // ~1 s: report instead of hanging (no printf: see below)
      atomicExch(&g_timeout, 1);
      break;
    }
  }

  // S = Q K^T: m64n64k16 x 4, both operands K-major
  float s[L / 2];
  const uint64_t dq = desc_kmajor_sw128(q_tile), dk = desc_kmajor_sw128(k_tile);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < D / 16; ++k) wgmma_m64n64k16_ss(s, desc_advance(dq, 32 * k), desc_advance(dk, 32 * k), k > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulator(s);

  // accumulator columns 16kk..16kk+15 -> the A fragment of k-step kk
  uint32_t pa[L / 16][4];
#pragma unroll
  for (int kk = 0; kk < L / 16; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) pa[kk][q] = pack_bf16x2(s[8 * kk + 2 * q], s[8 * kk + 2 * q + 1]);

  // O = P V: V[key][d] has d (= N) contiguous -> MN-major, trans-b = 1; chunks 8 KiB apart (LBO);
  // each k16 step moves 16 key rows of 128 B = 2048 B
  float o[DV / 2];
  const uint64_t dv = desc_mnmajor_sw128(v_tile, TILE);
  wgmma_fence();  // pa was written by ordinary instructions
#pragma unroll
  for (int kk = 0; kk < L / 16; ++kk) wgmma_m64n128k16_rs<1>(o, pa[kk], desc_advance(dv, 2048 * kk), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulator(o);

  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
#pragma unroll
  for (int i = 0; i < L / 2; ++i) {
    int row, col;
    acc_coord(i, lane, w, row, col);
    s_out[row * L + col] = s[i];
  }
#pragma unroll
  for (int i = 0; i < DV / 2; ++i) {
    int row, col;
    acc_coord(i, lane, w, row, col);
    o_out[row * DV + col] = o[i];
  }
}

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess) {                                                            \
      std::printf("FAIL: %s -> %s\n", #call, cudaGetErrorString(err_));                   \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9) {
    std::printf("FAIL: needs a Hopper GPU (sm_90)\n");
    return 1;
  }
  // Q, K in {-2..2}: |S| <= 64 * 4 = 256, integers, exact in fp32 and bf16. V in {-1, -0.5, 0, 0.5, 1}.
  std::vector<float> q(M * D), k(L * D), v(L * DV);
  uint32_t seed = 2024u;
  auto next = [&seed]() { seed = seed * 1664525u + 1013904223u; return seed >> 16; };
  for (auto& x : q) x = float(int(next() % 5) - 2);
  for (auto& x : k) x = float(int(next() % 5) - 2);
  for (auto& x : v) x = 0.5f * float(int(next() % 5) - 2);
  std::vector<__nv_bfloat16> qb(q.size()), kb(k.size()), vb(v.size());
  for (size_t i = 0; i < q.size(); ++i) qb[i] = __float2bfloat16(q[i]);
  for (size_t i = 0; i < k.size(); ++i) kb[i] = __float2bfloat16(k[i]);
  for (size_t i = 0; i < v.size(); ++i) vb[i] = __float2bfloat16(v[i]);

  __nv_bfloat16 *dq, *dk, *dv;
  float *ds, *dout;
  CHECK_CUDA(cudaMalloc(&dq, qb.size() * 2));
  CHECK_CUDA(cudaMalloc(&dk, kb.size() * 2));
  CHECK_CUDA(cudaMalloc(&dv, vb.size() * 2));
  CHECK_CUDA(cudaMalloc(&ds, M * L * 4));
  CHECK_CUDA(cudaMalloc(&dout, M * DV * 4));
  CHECK_CUDA(cudaMemcpy(dq, qb.data(), qb.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, kb.data(), kb.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, vb.data(), vb.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(ds, 0xFF, M * L * 4));  // NaN until written
  CHECK_CUDA(cudaMemset(dout, 0xFF, M * DV * 4));

  CUtensorMap map_q, map_k, map_v;
  CUresult rq = make_tmap_2d(&map_q, dq, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, D, M, D * 2, 64, 64,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  CUresult rk = make_tmap_2d(&map_k, dk, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, D, L, D * 2, 64, 64,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  CUresult rv = make_tmap_2d(&map_v, dv, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, DV, L, DV * 2, 64, 64,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  if (rq != CUDA_SUCCESS || rk != CUDA_SUCCESS || rv != CUDA_SUCCESS) {
    std::printf("FAIL: cuTensorMapEncodeTiled returned %d %d %d\n", int(rq), int(rk), int(rv));
    return 1;
  }
  CHECK_CUDA(cudaFuncSetAttribute(attention_path, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_ALLOC));
  attention_path<<<1, 128, SMEM_ALLOC>>>(map_q, map_k, map_v, ds, dout);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int timeout = 0;
  CHECK_CUDA(cudaMemcpyFromSymbol(&timeout, g_timeout, sizeof(timeout)));
  if (timeout) {
    std::printf("FAIL: TIMEOUT waiting on the TMA load barrier (expect_tx bytes or tensor maps wrong)\n");
    return 1;
  }

  std::vector<float> s_gpu(M * L), o_gpu(M * DV);
  CHECK_CUDA(cudaMemcpy(s_gpu.data(), ds, M * L * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(o_gpu.data(), dout, M * DV * 4, cudaMemcpyDeviceToHost));
  std::vector<double> s_ref(M * L);
  double err_s = 0.0, err_o = 0.0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < L; ++j) {
      double acc = 0.0;
      for (int d = 0; d < D; ++d) acc += double(q[i * D + d]) * double(k[j * D + d]);
      s_ref[i * L + j] = acc;
      const double e = std::fabs(double(s_gpu[i * L + j]) - acc);
      err_s = (e > err_s || std::isnan(e)) ? e : err_s;
    }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < DV; ++j) {
      double acc = 0.0;
      for (int t = 0; t < L; ++t) acc += s_ref[i * L + t] * double(v[t * DV + j]);
      const double e = std::fabs(double(o_gpu[i * DV + j]) - acc);
      err_o = (e > err_o || std::isnan(e)) ? e : err_o;
    }
  const bool ok = err_s <= 1e-3 && err_o <= 1e-3;  // exact arithmetic: any layout slip is >= 0.5
  std::printf("S = Q K^T (SS, K-major) max_abs_err=%.3e   O = P V (RS, MN-major V) max_abs_err=%.3e\n", err_s,
              err_o);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(ds);
  cudaFree(dout);
  return ok ? 0 : 1;
}
