// Standalone check of the Hopper pack helpers on a real GPU (sm_90a): C = A @ B^T with
// A[M,K], B[N,K] in bf16, fp32 accumulate. One warpgroup produces (mbarrier + TMA with tensor
// maps passed as __grid_constant__), one consumes (smem descriptors + wgmma m64n128k16); the
// tile is written twice, straight from the accumulator fragments and through a TMA store,
// and both are compared with a CPU reference. Prints the errors and PASS or FAIL.
//
// Build: nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a \
//          -I knowledge_packs/common/headers -I knowledge_packs/hopper/headers pack_gemm_tile.cu
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

constexpr int M = 128, N = 256, K = 512;
constexpr int BM = 64, BN = 128, BK = 64, STAGES = 4;
constexpr int KT = K / BK;  // 8 k-tiles: the 4-stage ring wraps twice, so both parities occur
constexpr uint32_t A_STAGE_BYTES = BM * BK * 2;  // 8 KiB, a multiple of the 1 KiB swizzle atom
constexpr uint32_t B_STAGE_BYTES = BN * BK * 2;  // 16 KiB
constexpr uint32_t C_TILE_BYTES = BM * BN * 4;   // fp32 staging tile for the TMA store
constexpr uint32_t SMEM_BYTES = STAGES * (A_STAGE_BYTES + B_STAGE_BYTES) + C_TILE_BYTES + 2 * STAGES * 8;
constexpr uint32_t SMEM_ALLOC = SMEM_BYTES + 1024;  // room to align the base to 1024 bytes

// mbar_wait with a deadline: a wrong count, byte total or parity becomes a report, not a hang.
// (No printf in the kernel: a call inside the wgmma pipeline makes ptxas serialise the wgmmas.)
struct Timeout {
  int hit, block_x, block_y, thread, kt, barrier;  // barrier: 0 = full, 1 = empty
  unsigned parity;
};
__device__ Timeout g_timeout;

__device__ void wait_or_flag(uint64_t* bar, uint32_t parity, int barrier, int kt) {
  const long long start = clock64();
  while (!mbar_try_wait(bar, parity)) {
    if (clock64() - start > (1ll << 31)) {  // ~1 s; a healthy wait takes microseconds
      if (atomicCAS(&g_timeout.hit, 0, 1) == 0) {
        g_timeout = Timeout{1, int(blockIdx.x), int(blockIdx.y), int(threadIdx.x), kt, barrier, parity};
      }
      return;
    }
  }
}

__global__ void __launch_bounds__(256, 1)
gemm_tile(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
          const __grid_constant__ CUtensorMap map_c, float* c_direct) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = a_tiles + STAGES * A_STAGE_BYTES;
  float* c_tile = reinterpret_cast<float*>(b_tiles + STAGES * B_STAGE_BYTES);
  uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<unsigned char*>(c_tile) + C_TILE_BYTES);
  uint64_t* empty = full + STAGES;

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int warp = warp_idx_uniform();
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);      // the producer's arrive.expect_tx
      mbar_init(&empty[s], 128);   // every consumer thread releases the stage
    }
    fence_mbarrier_init();
    prefetch_tensormap(&map_a);
    prefetch_tensormap(&map_b);
    prefetch_tensormap(&map_c);
  }
  __syncthreads();

  if (warp / 4 == 0) {  // producer warpgroup: one elected lane of warp 0 issues every load
    if (warp == 0 && elect_one()) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % STAGES;
        const uint32_t phase = (kt / STAGES) & 1;
        wait_or_flag(&empty[s], phase ^ 1, 1, kt);  // lap 0: parity 1 of a fresh barrier passes
        mbar_arrive_expect_tx(&full[s], A_STAGE_BYTES + B_STAGE_BYTES);
        tma_load_2d(a_tiles + s * A_STAGE_BYTES, &map_a, &full[s], kt * BK, m0);
        tma_load_2d(b_tiles + s * B_STAGE_BYTES, &map_b, &full[s], kt * BK, n0);
      }
    }
    return;
  }

  // consumer warpgroup
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  for (int kt = 0; kt < KT; ++kt) {
    const int s = kt % STAGES;
    wait_or_flag(&full[s], (kt / STAGES) & 1, 0, kt);
    const uint64_t da = desc_kmajor_sw128(a_tiles + s * A_STAGE_BYTES);
    const uint64_t db = desc_kmajor_sw128(b_tiles + s * B_STAGE_BYTES);
    fence_accumulator(acc);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k) {
      // +32 bytes = the next 16 bf16 of each 128-byte swizzled row
      wgmma_m64n128k16_ss(acc, desc_advance(da, 32 * k), desc_advance(db, 32 * k), (kt | k) != 0 ? 1u : 0u);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulator(acc);
    mbar_arrive(&empty[s]);
  }

  // epilogue: fragment layout straight to global, and the same values through smem + TMA store
  const int lane = threadIdx.x % 32, w = warp % 4;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    int row, col;
    acc_coord(i, lane, w, row, col);
    c_direct[(m0 + row) * N + n0 + col] = acc[i];
    c_tile[row * BN + col] = acc[i];
  }
  fence_proxy_async_smem();
  named_bar_sync(1, 128);
  if (threadIdx.x == 128) {
    tma_store_2d(&map_c, c_tile, n0, m0);
    tma_store_commit();
    tma_store_wait<0>();
  }
}

static float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

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

  std::vector<__nv_bfloat16> a(M * K), b(N * K);
  std::vector<float> af(M * K), bf(N * K);
  uint32_t seed = 12345u;
  auto next = [&seed]() {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;  // [-1, 1)
  };
  for (int i = 0; i < M * K; ++i) { af[i] = bf16_round(next()); a[i] = __float2bfloat16(af[i]); }
  for (int i = 0; i < N * K; ++i) { bf[i] = bf16_round(next()); b[i] = __float2bfloat16(bf[i]); }

  __nv_bfloat16 *da, *db;
  float *dc_direct, *dc_tma;
  CHECK_CUDA(cudaMalloc(&da, a.size() * 2));
  CHECK_CUDA(cudaMalloc(&db, b.size() * 2));
  CHECK_CUDA(cudaMalloc(&dc_direct, M * N * 4));
  CHECK_CUDA(cudaMalloc(&dc_tma, M * N * 4));
  CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dc_direct, 0xFF, M * N * 4));  // NaN until written
  CHECK_CUDA(cudaMemset(dc_tma, 0xFF, M * N * 4));

  CUtensorMap map_a, map_b, map_c;
  CUresult ra = make_tmap_2d(&map_a, da, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, K, M, K * 2, BK, BM,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  CUresult rb = make_tmap_2d(&map_b, db, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, K, N, K * 2, BK, BN,
                             CU_TENSOR_MAP_SWIZZLE_128B);
  CUresult rc = make_tmap_2d(&map_c, dc_tma, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, N, M, N * 4, BN, BM,
                             CU_TENSOR_MAP_SWIZZLE_NONE);
  if (ra != CUDA_SUCCESS || rb != CUDA_SUCCESS || rc != CUDA_SUCCESS) {
    std::printf("FAIL: cuTensorMapEncodeTiled returned %d %d %d\n", int(ra), int(rb), int(rc));
    return 1;
  }

  CHECK_CUDA(cudaFuncSetAttribute(gemm_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_ALLOC));
  gemm_tile<<<dim3(N / BN, M / BM), 256, SMEM_ALLOC>>>(map_a, map_b, map_c, dc_direct);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  Timeout timeout;
  CHECK_CUDA(cudaMemcpyFromSymbol(&timeout, g_timeout, sizeof(timeout)));
  if (timeout.hit) {
    std::printf("FAIL: TIMEOUT block (%d,%d) thread %d waiting on %s[k-tile %d] with parity %u\n", timeout.block_x,
                timeout.block_y, timeout.thread, timeout.barrier == 0 ? "full" : "empty", timeout.kt, timeout.parity);
    return 1;
  }

  std::vector<float> c_direct(M * N), c_tma(M * N);
  CHECK_CUDA(cudaMemcpy(c_direct.data(), dc_direct, M * N * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(c_tma.data(), dc_tma, M * N * 4, cudaMemcpyDeviceToHost));

  double max_direct = 0.0, max_tma = 0.0, max_ref = 0.0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k) ref += double(af[i * K + k]) * double(bf[j * K + k]);
      const double e1 = std::fabs(double(c_direct[i * N + j]) - ref);
      const double e2 = std::fabs(double(c_tma[i * N + j]) - ref);
      max_direct = (e1 > max_direct || std::isnan(e1)) ? e1 : max_direct;
      max_tma = (e2 > max_tma || std::isnan(e2)) ? e2 : max_tma;
      max_ref = std::fmax(max_ref, std::fabs(ref));
    }
  }
  const double tol = 1e-2;
  const bool ok = max_direct <= tol && max_tma <= tol;  // NaN compares false: unwritten fails
  std::printf("M=%d N=%d K=%d  max|ref|=%.3f  max_abs_err direct=%.3e tma_store=%.3e  tol=%.0e\n", M, N, K,
              max_ref, max_direct, max_tma, tol);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc_direct);
  cudaFree(dc_tma);
  return ok ? 0 : 1;
}
