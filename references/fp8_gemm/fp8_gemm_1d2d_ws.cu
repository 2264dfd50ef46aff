// FP8 block-scaled GEMM for fp8_gemm_nt_1d2d_n4096_k7168 (any N, K multiples of 128), Hopper sm_90a.
//
// D[M,N] = sum over 128-wide K blocks kb of SF_A[m,kb] * SF_B[n/128,kb] * (A[m,kb] . B[n,kb]), bf16 out.
// A [M,K] and B [N,K] are e4m3, both K-major (the only layout wgmma takes FP8 operands in); SF_A
// [M,K/128] and SF_B [N/128,K/128] fp32 (DeepGEMM's 1D2D recipe).
//
// Structure (the ladder's step 4 without clusters, plus DeepGEMM's promotion):
//  * Warp specialisation: warpgroup 0 issues the TMA loads (one thread, 128-byte swizzle, one 128-wide
//    K block of A and B per stage); warpgroups 1 and 2 each own 64 rows of a 128x128 tile and run
//    wgmma.m64n128k32.f32.e4m3.e4m3 (SASS QGMMA). setmaxnreg moves registers to the consumers.
//  * Promotion (DeepGEMM's): each 128-wide K block's four chained wgmmas (k = 32) start a fresh partial
//    (scale-d = 0), which is scaled by SF_A[row,kb] * SF_B[n0/128,kb] and added to the running fp32
//    total in registers; the scales differ per K block, so they cannot be applied after the loop. Two
//    partials alternate: block kb's wgmmas run while block kb - 1's partial is promoted.
//  * Precision: QGMMA adds its products with ~14 bits after aligning them to the largest exponent, and a
//    chained accumulator (scale-d = 1) is aligned and truncated with them, so chaining four wgmmas leaves
//    ~0.5 % of the elements (those near zero) outside atol = rtol = 1e-2 on the H200. The task accepts
//    99 % of the elements inside (its tolerance note says why), so this passes; -DFP8_PROMOTE_K=32 (a promotion
//    after every wgmma) or 64 (after two chained, ~0.12 % outside in qgmma_precision_model.py) trade
//    speed for fewer elements outside: on the H200 at 38e5a3e, 32 ran 0.544x cuBLAS, 64 0.680x, and 128
//    without the pipelining 0.749x.
//  * Persistent grid: one CTA per SM walks the tiles in groups of 8 row-blocks for L2 reuse, so the
//    producer loads the next tile while the consumers store this one.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#ifndef FP8_STAGES
#define FP8_STAGES 6
#endif
#ifndef FP8_PROMOTE_K
#define FP8_PROMOTE_K 128  // 128: after each K block (four chained wgmmas); 64: after two; 32: after each
#endif

namespace {

constexpr int BM = 128, BN = 128, BK = 128;  // BK = the scale block: one promotion per stage
constexpr int STAGES = FP8_STAGES;
constexpr int THREADS = 384;                // producer warpgroup + two consumer warpgroups
constexpr int GROUP_M = 8;
constexpr uint32_t A_BYTES = BM * BK;       // 16 KB of e4m3
constexpr uint32_t B_BYTES = BN * BK;       // 16 KB
constexpr int SMEM_BYTES = STAGES * (A_BYTES + B_BYTES) + 2 * STAGES * 8 + 1024;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_LOOP;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// K-major operand in the 128-byte swizzle TMA writes: 8-row groups 1024 bytes apart (SBO).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
         (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_one() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x128] (+)= A[64x32] * B[32x128], e4m3 operands from shared memory, fp32 accumulators.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
}

struct Tile {
  int m0, n0;
};
// Grouped order: GROUP_M row-blocks walk one column of tiles together (shared B in L2).
__device__ __forceinline__ Tile tile_of(int t, int num_mb, int num_nb) {
  const int per_group = GROUP_M * num_nb;
  const int g = t / per_group;
  const int rows = min(num_mb - g * GROUP_M, GROUP_M);
  const int r = t - g * per_group;
  return {(g * GROUP_M + r % rows) * BM, (r / rows) * BN};
}

__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_1d2d_ws(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const float* __restrict__ sf_a, const float* __restrict__ sf_b, __nv_bfloat16* __restrict__ D,
                     int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t s_a = raw + ((1024 - (raw & 1023)) & 1023);  // the 128-byte swizzle wants 1 KB alignment
  const uint32_t s_b = s_a + STAGES * A_BYTES;
  const uint32_t bars = s_b + STAGES * B_BYTES;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int num_mb = (M + BM - 1) / BM, num_nb = N / BN;
  const int num_tiles = num_mb * num_nb;
  const int k_blocks = K / BK;

  if (threadIdx.x < 128) {  // producer warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      int it = 0;
      for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
        const Tile tile = tile_of(t, num_mb, num_nb);
        for (int kb = 0; kb < k_blocks; ++kb, ++it) {
          const int s = it % STAGES;
          mbar_wait(empty(s), ((it / STAGES) & 1) ^ 1);
          mbar_expect_tx(full(s), A_BYTES + B_BYTES);
          tma_load_2d(s_a + s * A_BYTES, &map_a, kb * BK, tile.m0, full(s));
          tma_load_2d(s_b + s * B_BYTES, &map_b, kb * BK, tile.n0, full(s));
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int wg = threadIdx.x / 128 - 1;  // consumer 0 or 1: rows 64*wg .. 64*wg+63 of the tile
  const int warp = (threadIdx.x / 32) & 3;
  const int lane = threadIdx.x & 31;
  float partial[64];
  float partial2[64];  // the other partial: one is written by wgmmas while the other is promoted
  float total[64];
  // total += partial scaled: fragment 4j, 4j+1 are row lane/4 (scale_lo), 4j+2, 4j+3 row lane/4 + 8.
  auto promote = [&](const float (&p)[64], float lo, float hi) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      total[4 * j] += p[4 * j] * lo;
      total[4 * j + 1] += p[4 * j + 1] * lo;
      total[4 * j + 2] += p[4 * j + 2] * hi;
      total[4 * j + 3] += p[4 * j + 3] * hi;
    }
  };
  int it = 0;
  for (int t = blockIdx.x; t < num_tiles; t += gridDim.x) {
    const Tile tile = tile_of(t, num_mb, num_nb);
    const int row = tile.m0 + wg * 64 + warp * 16 + lane / 4;  // and row + 8
    const float* sa_lo = sf_a + static_cast<size_t>(min(row, M - 1)) * k_blocks;
    const float* sa_hi = sf_a + static_cast<size_t>(min(row + 8, M - 1)) * k_blocks;
    const float* sb = sf_b + static_cast<size_t>(tile.n0 / BN) * k_blocks;
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] = 0.f;
#if FP8_PROMOTE_K == 128
    // Software-pipelined over K blocks: block kb's four chained wgmmas go into one partial while block
    // kb - 1's partial (the other one) retires, frees its stage and is promoted, so the tensor pipe
    // has work during the promotion. Unrolled by two so each partial stays a register array.
    struct Pending {
      int stage;
      float lo, hi;
    };
    auto issue = [&](float (&p)[64], int kb, Pending& next) {
      const int s = it % STAGES;
      const float scale_b = __ldg(sb + kb);  // loaded before the wait: off the critical path
      next = {s, __ldg(sa_lo + kb) * scale_b, __ldg(sa_hi + kb) * scale_b};
      mbar_wait(full(s), (it / STAGES) & 1);
      ++it;
      const uint32_t a = s_a + s * A_BYTES + wg * (64 * 128);
      const uint32_t b = s_b + s * B_BYTES;
      fence_regs(p);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 32; ++kk) wgmma_m64n128k32_e4m3(p, smem_desc(a + kk * 32), smem_desc(b + kk * 32), kk);
      wgmma_commit();
    };
    auto retire = [&](float (&p)[64], const Pending& done, bool last) {
      if (last)
        wgmma_wait_all();
      else
        wgmma_wait_one();  // the group issued before the newest retired
      fence_regs(p);
      if (lane == 0) mbar_arrive(empty(done.stage));  // the stage is free once this warp's wgmmas retired
      promote(p, done.lo, done.hi);
    };
    Pending even, odd;
    issue(partial, 0, even);
    int kb = 1;
    for (; kb + 1 < k_blocks; kb += 2) {
      issue(partial2, kb, odd);
      retire(partial, even, false);
      issue(partial, kb + 1, even);
      retire(partial2, odd, false);
    }
    if (kb < k_blocks) {  // an even number of K blocks: the last one goes into partial2
      issue(partial2, kb, odd);
      retire(partial, even, false);
      retire(partial2, odd, true);
    } else {
      retire(partial, even, true);
    }
#else
    for (int kb = 0; kb < k_blocks; ++kb, ++it) {
      const int s = it % STAGES;
      const float scale_b = __ldg(sb + kb);  // loaded before the wait: off the critical path
      const float scale_lo = __ldg(sa_lo + kb) * scale_b;
      const float scale_hi = __ldg(sa_hi + kb) * scale_b;
      mbar_wait(full(s), (it / STAGES) & 1);
      const uint32_t a = s_a + s * A_BYTES + wg * (64 * 128);
      const uint32_t b = s_b + s * B_BYTES;
#if FP8_PROMOTE_K == 32
      // wgmma kk writes partial[kk & 1]; the other one is promoted meanwhile.
      fence_regs(partial);
      fence_regs(partial2);
      wgmma_fence();
      wgmma_m64n128k32_e4m3(partial, smem_desc(a), smem_desc(b), 0);
      wgmma_commit();
#pragma unroll
      for (int kk = 1; kk < BK / 32; ++kk) {
        float (&issue)[64] = (kk & 1) ? partial2 : partial;
        float (&ready)[64] = (kk & 1) ? partial : partial2;
        wgmma_fence();
        wgmma_m64n128k32_e4m3(issue, smem_desc(a + kk * 32), smem_desc(b + kk * 32), 0);
        wgmma_commit();
        wgmma_wait_one();  // wgmma kk - 1 retired
        fence_regs(ready);
        promote(ready, scale_lo, scale_hi);
      }
      wgmma_wait_all();
      fence_regs(partial2);
      if (lane == 0) mbar_arrive(empty(s));  // the stage is free once this warp's wgmmas retired
      promote(partial2, scale_lo, scale_hi);
#elif FP8_PROMOTE_K == 64
      // Two chains of two wgmmas: the first pair's partial is promoted while the second pair runs.
      fence_regs(partial);
      fence_regs(partial2);
      wgmma_fence();
      wgmma_m64n128k32_e4m3(partial, smem_desc(a), smem_desc(b), 0);
      wgmma_m64n128k32_e4m3(partial, smem_desc(a + 32), smem_desc(b + 32), 1);
      wgmma_commit();
      wgmma_fence();
      wgmma_m64n128k32_e4m3(partial2, smem_desc(a + 64), smem_desc(b + 64), 0);
      wgmma_m64n128k32_e4m3(partial2, smem_desc(a + 96), smem_desc(b + 96), 1);
      wgmma_commit();
      wgmma_wait_one();  // the first pair retired
      fence_regs(partial);
      promote(partial, scale_lo, scale_hi);
      wgmma_wait_all();
      fence_regs(partial2);
      if (lane == 0) mbar_arrive(empty(s));  // the stage is free once this warp's wgmmas retired
      promote(partial2, scale_lo, scale_hi);
#else
#error "FP8_PROMOTE_K must be 32, 64 or 128"
#endif
    }
#endif
    const int col0 = tile.n0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int col = col0 + 8 * j;
      if (row < M)
        *reinterpret_cast<__nv_bfloat162*>(D + static_cast<size_t>(row) * N + col) =
            __floats2bfloat162_rn(total[4 * j], total[4 * j + 1]);
      if (row + 8 < M)
        *reinterpret_cast<__nv_bfloat162*>(D + static_cast<size_t>(row + 8) * N + col) =
            __floats2bfloat162_rn(total[4 * j + 2], total[4 * j + 3]);
    }
  }
}

}  // namespace

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    TVM_FFI_CHECK(e == cudaSuccess && q == cudaDriverEntryPointSuccess && p != nullptr, RuntimeError)
        << "cuTensorMapEncodeTiled not available";
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Row-major e4m3 matrix [rows, cols] (cols = K), boxes of box_rows x 128 bytes, 128-byte swizzle.
static CUtensorMap make_map_fp8(const void* base, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {cols};
  cuuint32_t box[2] = {BK, box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = encode_tiled_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box,
                                 estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_CHECK(r == CUDA_SUCCESS, RuntimeError) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(r);
  return map;
}

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView SF_A, tvm::ffi::TensorView B, tvm::ffi::TensorView SF_B,
         tvm::ffi::TensorView D) {
  const DLDataType f32{kDLFloat, 32, 1}, bf16{kDLBfloat, 16, 1};
  TVM_FFI_CHECK(A.dtype().bits == 8 && B.dtype().bits == 8, TypeError) << "A and B must be float8_e4m3fn";
  TVM_FFI_CHECK(SF_A.dtype() == f32 && SF_B.dtype() == f32 && D.dtype() == bf16, TypeError)
      << "SF_A, SF_B must be float32 and D bfloat16";
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  TVM_FFI_CHECK(B.size(1) == K && D.size(0) == M && D.size(1) == N, ValueError) << "shape mismatch";
  TVM_FFI_CHECK(K % BK == 0 && N % BN == 0, ValueError) << "K and N must be multiples of 128";
  TVM_FFI_CHECK(SF_A.size(0) == M && SF_A.size(1) == K / BK && SF_B.size(0) == N / BN && SF_B.size(1) == K / BK,
                ValueError)
      << "scale shapes must be [M, K/128] and [N/128, K/128]";
  if (M == 0) return;

  const CUtensorMap map_a = make_map_fp8(A.data_ptr(), M, K, BM);
  const CUtensorMap map_b = make_map_fp8(B.data_ptr(), N, K, BN);
  const int device = A.device().device_id;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  static const bool ready = [] {
    return cudaFuncSetAttribute(fp8_gemm_1d2d_ws, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) ==
           cudaSuccess;
  }();
  TVM_FFI_CHECK(ready, RuntimeError) << "cannot raise the shared-memory limit";
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t tiles = ((M + BM - 1) / BM) * (N / BN);
  const unsigned grid = static_cast<unsigned>(tiles < sms ? tiles : sms);
  fp8_gemm_1d2d_ws<<<grid, THREADS, SMEM_BYTES, stream>>>(
      map_a, map_b, static_cast<const float*>(SF_A.data_ptr()), static_cast<const float*>(SF_B.data_ptr()),
      static_cast<__nv_bfloat16*>(D.data_ptr()), static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
