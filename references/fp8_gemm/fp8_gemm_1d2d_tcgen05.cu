// FP8 block-scaled GEMM for fp8_gemm_nt_1d2d_n4096_k7168 (any N, K multiples of 128), Blackwell sm_100a.
//
// STATUS: built with nvcc 13.0 for sm_100a and checked by the evaluator's static tier only (UTCQMMA,
// LDTM, UTCBAR, TMA and mbarrier present in its SASS, no spills). It has NEVER RUN: no Blackwell GPU
// was available when it was written, so its correctness and speed are unverified. Treat it as the
// static tier's positive control for the Blackwell FP8 family until a B200 run says otherwise.
//
// D[M,N] = sum over 128-wide K blocks kb of SF_A[m,kb] * SF_B[n/128,kb] * (A[m,kb] . B[n,kb]), bf16 out;
// A [M,K] and B [N,K] e4m3, K-major; SF_A [M,K/128], SF_B [N/128,K/128] fp32 (DeepGEMM's 1D2D recipe).
// Same `run(A, SF_A, B, SF_B, D)` ABI as the Hopper reference (fp8_gemm_1d2d_ws.cu).
//
// One CTA per 128 x 128 output tile, 192 threads in three roles:
//  * warp 0, one thread: TMA loads of one 128-wide K block of A and B per stage (128-byte swizzle),
//    STAGES-deep full/empty mbarrier ring;
//  * warp 1: allocates 256 TMEM columns (two 128-column fp32 accumulators); one thread issues, per K
//    block, four tcgen05.mma.cta_group::1.kind::f8f6f4 (M = 128, N = 128, K = 32 each, SASS UTCQMMA)
//    into accumulator kb % 2 starting fresh (enable-input-d false on the first), then tcgen05.commit
//    on the stage's empty barrier (smem free) and on that accumulator's full barrier;
//  * warps 2..5 (TMEM lane quarters 2, 3, 0, 1): promotion. Each thread owns one row of the tile: it
//    waits for accumulator kb % 2, reads its 128 columns with tcgen05.ld.32x32b.x32, frees the
//    accumulator for the MMA of block kb + 2, and adds them times SF_A[row,kb] * SF_B[n0/128,kb] into
//    128 fp32 registers. The scales change with every K block, so the partial sums cannot share one
//    accumulator across blocks; the double buffer lets block kb + 1 multiply while kb is promoted.
//    After the last block the row is rounded to bf16 and stored.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#ifndef FP8_STAGES
#define FP8_STAGES 4
#endif

namespace {

constexpr int BM = 128, BN = 128, BK = 128;  // BK = the scale block: one promotion per K block
constexpr int UMMA_K = 32;                   // K of one kind::f8f6f4 MMA (32 bytes of e4m3)
constexpr int STAGES = FP8_STAGES;
constexpr int THREADS = 192;                 // TMA warp, MMA warp, four promotion warps
constexpr uint32_t A_BYTES = BM * BK;        // 16 KB of e4m3
constexpr uint32_t B_BYTES = BN * BK;        // 16 KB
constexpr uint32_t TMEM_COLS = 2 * BN;       // two fp32 accumulators of 128 lanes x 128 columns
constexpr int SMEM_BYTES = STAGES * (A_BYTES + B_BYTES) + (2 * STAGES + 4) * 8 + 16 + 1024;

// kind::f8f6f4 instruction descriptor: D f32 (bits 4-5 = 1), A and B e4m3 (bits 7-9, 10-12 = 0),
// both K-major (bits 15, 16 = 0), N >> 3 at bit 17, M >> 4 at bit 24.
constexpr uint32_t IDESC = (1u << 4) | (static_cast<uint32_t>(BN >> 3) << 17) | (static_cast<uint32_t>(BM >> 4) << 24);

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
__device__ __forceinline__ void tc_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tc_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }

// Blackwell shared-memory descriptor of a K-major operand in the 128-byte swizzle TMA writes: start
// address >> 4, LBO 16 B (unused for swizzled K-major), SBO 1024 B between 8-row groups, the
// descriptor version bit 46, swizzle mode 2 (128B) in bits 61-63. The tile base is 1 KB aligned, so
// the base-offset field stays 0; a K step of 32 bytes adds 2 to the address field.
__device__ __forceinline__ uint64_t umma_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
         (1ull << 46) | (2ull << 61);
}
__device__ __forceinline__ void umma_f8f6f4(uint32_t d_tmem, uint64_t da, uint64_t db, uint32_t accumulate) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %4, 0;\n"
      "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}\n" ::"r"(d_tmem),
      "l"(da), "l"(db), "r"(IDESC), "r"(accumulate)
      : "memory");
}
// Arrives once on `bar` when every tcgen05 operation this thread issued before has completed.
__device__ __forceinline__ void umma_commit(uint32_t bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar) : "memory");
}
// 32 consecutive fp32 columns of this warp's 32 TMEM lanes: thread i gets lane (taddr.lane + i).
__device__ __forceinline__ void tmem_ld32(uint32_t taddr, float (&v)[32]) {
  uint32_t r[32];
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]),
        "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]),
        "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]),
        "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#pragma unroll
  for (int i = 0; i < 32; ++i) v[i] = __uint_as_float(r[i]);
}

__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_1d2d_tcgen05(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                          const float* __restrict__ sf_a, const float* __restrict__ sf_b,
                          __nv_bfloat16* __restrict__ D, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t s_a = raw + ((1024 - (raw & 1023)) & 1023);  // the 128-byte swizzle wants 1 KB alignment
  const uint32_t s_b = s_a + STAGES * A_BYTES;
  const uint32_t bars = s_b + STAGES * B_BYTES;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };
  auto acc_full = [&](int b) { return bars + 8 * (2 * STAGES + b); };
  auto acc_empty = [&](int b) { return bars + 8 * (2 * STAGES + 2 + b); };
  const uint32_t tmem_slot = bars + 8 * (2 * STAGES + 4);
  const uint32_t* tmem_slot_ptr =
      reinterpret_cast<const uint32_t*>(smem_raw + (tmem_slot - raw));

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_blocks = K / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);   // the producer's expect_tx
      mbar_init(empty(s), 1);  // one tcgen05.commit per stage
    }
    for (int b = 0; b < 2; ++b) {
      mbar_init(acc_full(b), 1);   // one tcgen05.commit per K block
      mbar_init(acc_empty(b), 4);  // one arrival per promotion warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (warp == 1) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(tmem_slot), "r"(TMEM_COLS));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  tc_fence_before();
  __syncthreads();
  tc_fence_after();
  const uint32_t tmem = *tmem_slot_ptr;

  if (warp == 0) {
    if (lane == 0) {
      for (int kb = 0; kb < k_blocks; ++kb) {
        const int s = kb % STAGES;
        mbar_wait(empty(s), ((kb / STAGES) & 1) ^ 1);
        mbar_expect_tx(full(s), A_BYTES + B_BYTES);
        tma_load_2d(s_a + s * A_BYTES, &map_a, kb * BK, m0, full(s));
        tma_load_2d(s_b + s * B_BYTES, &map_b, kb * BK, n0, full(s));
      }
    }
  } else if (warp == 1) {
    if (lane == 0) {
      for (int kb = 0; kb < k_blocks; ++kb) {
        const int s = kb % STAGES, buf = kb & 1;
        mbar_wait(acc_empty(buf), ((kb >> 1) & 1) ^ 1);  // promoted out (first use passes at once)
        mbar_wait(full(s), (kb / STAGES) & 1);            // A and B of this block landed
        tc_fence_after();
        const uint64_t da = umma_desc(s_a + s * A_BYTES), db = umma_desc(s_b + s * B_BYTES);
#pragma unroll
        for (int kk = 0; kk < BK / UMMA_K; ++kk)  // +2 in the address field = +32 bytes along K
          umma_f8f6f4(tmem + buf * BN, da + 2 * kk, db + 2 * kk, kk > 0 ? 1u : 0u);
        umma_commit(empty(s));       // the stage's smem is free once these MMAs are done
        umma_commit(acc_full(buf));  // and the K block's partial product is in TMEM
      }
    }
  } else {
    // Promotion: warp w reads TMEM lanes 32 * (w % 4) .. + 31, i.e. tile rows.
    const int quarter = warp & 3;
    const int row = m0 + quarter * 32 + lane;
    const float* sa = sf_a + static_cast<size_t>(min(row, M - 1)) * k_blocks;
    const float* sb = sf_b + static_cast<size_t>(n0 / BN) * k_blocks;
    const uint32_t t_row = tmem + (static_cast<uint32_t>(quarter * 32) << 16);
    float total[BN];
#pragma unroll
    for (int i = 0; i < BN; ++i) total[i] = 0.f;
    for (int kb = 0; kb < k_blocks; ++kb) {
      const int buf = kb & 1;
      const float scale = __ldg(sa + kb) * __ldg(sb + kb);  // loaded before the wait
      mbar_wait(acc_full(buf), (kb >> 1) & 1);
      tc_fence_after();
#pragma unroll
      for (int c = 0; c < BN / 32; ++c) {
        float v[32];
        tmem_ld32(t_row + buf * BN + c * 32, v);
        if (c == BN / 32 - 1) {  // every column of this accumulator is in registers: hand it back
          tc_fence_before();
          __syncwarp();
          if (lane == 0) mbar_arrive(acc_empty(buf));
        }
#pragma unroll
        for (int j = 0; j < 32; ++j) total[c * 32 + j] = fmaf(v[j], scale, total[c * 32 + j]);
      }
    }
    if (row < M) {
      uint4* out = reinterpret_cast<uint4*>(D + static_cast<size_t>(row) * N + n0);
#pragma unroll
      for (int q = 0; q < BN / 8; ++q) {
        uint4 pk;
        uint32_t* w = reinterpret_cast<uint32_t*>(&pk);
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          __nv_bfloat162 p = __floats2bfloat162_rn(total[8 * q + 2 * h], total[8 * q + 2 * h + 1]);
          w[h] = *reinterpret_cast<uint32_t*>(&p);
        }
        out[q] = pk;
      }
    }
  }

  tc_fence_before();
  __syncthreads();
  if (warp == 1) {
    tc_fence_after();
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(tmem), "r"(TMEM_COLS));
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
// Rows past the end (M not a multiple of 128) are filled with zeros by the TMA unit.
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
    return cudaFuncSetAttribute(fp8_gemm_1d2d_tcgen05, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) ==
           cudaSuccess;
  }();
  TVM_FFI_CHECK(ready, RuntimeError) << "cannot raise the shared-memory limit";
  const dim3 grid(static_cast<unsigned>(N / BN), static_cast<unsigned>((M + BM - 1) / BM));
  fp8_gemm_1d2d_tcgen05<<<grid, THREADS, SMEM_BYTES, stream>>>(
      map_a, map_b, static_cast<const float*>(SF_A.data_ptr()), static_cast<const float*>(SF_B.data_ptr()),
      static_cast<__nv_bfloat16*>(D.data_ptr()), static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
