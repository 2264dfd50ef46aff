// GEMM ladder, step 4: warp-specialised persistent kernel with clusters and TMA multicast.
//
// C[M,N] = A[M,K] @ B[N,K]^T, bf16 in/out, fp32 accumulate (task family gemm_n*_k*).
//
// What changes from step 3:
//  * Warp specialisation: warpgroup 0 is the producer (one thread issues every TMA load); warpgroups
//    1 and 2 are consumers (wgmma + epilogue). `setmaxnreg` moves registers from the producer
//    (40 per thread) to the consumers (232 per thread), which hold a 64x256 fp32 accumulator each.
//  * Persistent grid: one CTA per SM walks a static list of output tiles in an L2-friendly order,
//    so the producer prefetches the next tile's operands while the consumers run the epilogue.
//  * Clusters of GEMM_CLUSTER CTAs (default 2) take vertically adjacent 128x256 tiles that share one
//    B slab: each CTA loads half of that slab and multicasts it into both CTAs' shared memory,
//    halving the L2->SM traffic for B. A stage is refilled only after the consumers of *both* CTAs
//    have released it (the empty barrier counts arrivals from the whole cluster).
//  * TMA-store epilogue: each consumer warpgroup writes its bf16 results into a swizzled shared
//    buffer (two passes of 64x128 so that four 48 KB stages still fit) and one thread issues
//    asynchronous TMA stores, so the next tile's wgmmas start while C drains to memory.
//
// Measured on an H200 (references/README.md): 0.765 ms at M=8192, 786 TFLOP/s, 0.98x cuBLAS;
// the direct-store epilogue (GEMM_TMA_EPILOGUE=0) ran 0.812 ms, without clusters 0.858 ms.
//
// Pipeline per stage s: full[s] (TMA bytes landed; 1 arrival + transaction bytes) and empty[s]
// (8 consumer warps per CTA x cluster size arrivals).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#ifndef GEMM_CLUSTER
#define GEMM_CLUSTER 2
#endif
#ifndef GEMM_STAGES
#define GEMM_STAGES 4
#endif
#ifndef GEMM_GROUP_M
#define GEMM_GROUP_M 8
#endif
#ifndef GEMM_TMA_EPILOGUE
#define GEMM_TMA_EPILOGUE 2  // n > 0: stage C in shared memory in n passes, write it with TMA stores;
                             // 0: store the fragments straight to global memory
#endif

namespace {

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int STAGES = GEMM_STAGES;
constexpr int CLUSTER = GEMM_CLUSTER;
constexpr int THREADS = 384;
constexpr uint32_t A_BYTES = BM * BK * 2;             // 16 KB
constexpr uint32_t B_BYTES = BN * BK * 2;             // 32 KB
constexpr int B_SLICE_ROWS = BN / CLUSTER;            // rows of the B slab each cluster CTA loads
constexpr int C_PASSES = GEMM_TMA_EPILOGUE > 0 ? GEMM_TMA_EPILOGUE : 1;
constexpr uint32_t C_BYTES = GEMM_TMA_EPILOGUE ? 64 * (BN / C_PASSES) * 2 : 0;  // per consumer warpgroup
static_assert(BN % (64 * C_PASSES) == 0, "each pass stores whole 64-column boxes");
constexpr int SMEM_BYTES = STAGES * (A_BYTES + B_BYTES) + 2 * C_BYTES + 2 * STAGES * 8 + 1024;
static_assert(CLUSTER == 1 || CLUSTER == 2, "cluster of 1 or 2 CTAs");

// ---- Hopper building blocks (PTX) -------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
// Arrive once and add `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Spin until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_LOOP;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// 2-D tile load global -> shared through the tensor-memory accelerator, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Shared-memory matrix descriptor for wgmma, 128-byte swizzle (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B). lbo/sbo in bytes.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of accumulator registers across wgmma issue/wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x256] (+)= A[64x16] (smem desc) * B[16x256] (smem desc); tb selects a transposed (MN-major) B.
template <int TB>
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TB));
}

}  // namespace

// ---- host side: tensor maps through the driver entry point (no -lcuda symbol needed) ----------
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

// Row-major bf16 matrix [rows, cols] seen as a 2-D tensor map with a box of box_rows x box_cols
// (box_cols * 2 bytes must be 128 for the 128-byte swizzle).
static CUtensorMap make_map_2d(const void* base, uint64_t rows, uint64_t cols, uint64_t row_stride_elems,
                               uint32_t box_rows, uint32_t box_cols) {
  CUtensorMap map;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {row_stride_elems * 2};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = encode_tiled_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                                 estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_CHECK(r == CUDA_SUCCESS, RuntimeError) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(r);
  return map;
}

namespace {

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Arrive on the mbarrier at the same shared offset in CTA `cta` of this cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}
// TMA load written to the same shared offset of every CTA in `mask`, each completing on its own
// mbarrier at offset `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                                      uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

#if GEMM_TMA_EPILOGUE
// Asynchronous 2-D tile store shared -> global (bulk-group completion).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(c0),
               "r"(c1), "r"(src)
               : "memory");
}
#endif

struct Tile {
  int m_group;  // index of the cluster's group of CLUSTER vertically adjacent 128-row blocks
  int n_block;
};
// Tiles walk GEMM_GROUP_M cluster rows at a time so that CTAs running together share A and B in L2.
__device__ __forceinline__ Tile tile_at(int t, int num_mg, int num_nb) {
  const int per_group = GEMM_GROUP_M * num_nb;
  const int g = t / per_group;
  const int first = g * GEMM_GROUP_M;
  const int rows = min(num_mg - first, GEMM_GROUP_M);
  const int r = t - g * per_group;
  return {first + r % rows, r / rows};
}

__global__ void __launch_bounds__(THREADS, 1)
    gemm_ws_persistent(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const __grid_constant__ CUtensorMap map_c, __nv_bfloat16* __restrict__ C, int M, int N,
                       int K) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t s_a = raw + ((1024 - (raw & 1023)) & 1023);  // 128-byte swizzle wants 1 KB alignment
  const uint32_t s_b = s_a + STAGES * A_BYTES;
  const uint32_t s_c = s_b + STAGES * B_BYTES;  // C staging (TMA epilogue only)
  const uint32_t bars = s_c + 2 * C_BYTES;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };

  const int wg = threadIdx.x / 128;
  const uint32_t rank = CLUSTER > 1 ? cluster_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8 * CLUSTER);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (CLUSTER > 1) cluster_sync(); else __syncthreads();

  const int num_mb = (M + BM - 1) / BM;
  const int num_nb = (N + BN - 1) / BN;
  const int num_mg = (num_mb + CLUSTER - 1) / CLUSTER;
  const int num_tiles = num_mg * num_nb;
  const int k_iters = (K + BK - 1) / BK;
  const int first_tile = blockIdx.x / CLUSTER;
  const int tile_step = gridDim.x / CLUSTER;

  if (wg == 0) {
    // Producer warpgroup: keep few registers, one thread drives the copy engine.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      for (int t = first_tile; t < num_tiles; t += tile_step) {
        const Tile tile = tile_at(t, num_mg, num_nb);
        const int m0 = (tile.m_group * CLUSTER + rank) * BM;
        const int n0 = tile.n_block * BN;
        for (int k = 0; k < k_iters; ++k) {
          mbar_wait(empty(stage), phase ^ 1);
          mbar_expect_tx(full(stage), A_BYTES + B_BYTES);
          tma_load_2d(s_a + stage * A_BYTES, &map_a, k * BK, m0, full(stage));
          if (CLUSTER > 1) {
            tma_load_2d_multicast(s_b + stage * B_BYTES + rank * (B_SLICE_ROWS * BK * 2), &map_b, k * BK,
                                  n0 + rank * B_SLICE_ROWS, full(stage), (1u << CLUSTER) - 1);
          } else {
            tma_load_2d(s_b + stage * B_BYTES, &map_b, k * BK, n0, full(stage));
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = wg - 1;  // which 64-row half of the tile this warpgroup owns
    const int warp = (threadIdx.x / 32) & 3;
    const int lane = threadIdx.x & 31;
    auto release = [&](int s) {
      if (lane == 0) {
        mbar_arrive(empty(s));
        if (CLUSTER > 1) mbar_arrive_cluster(empty(s), rank ^ 1);
      }
    };
    int stage = 0;
    uint32_t phase = 0;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    for (int t = first_tile; t < num_tiles; t += tile_step) {
      const Tile tile = tile_at(t, num_mg, num_nb);
      const int m0 = (tile.m_group * CLUSTER + rank) * BM;
      const int n0 = tile.n_block * BN;
      int prev = 0;
      for (int k = 0; k < k_iters; ++k) {
        mbar_wait(full(stage), phase);
        const uint32_t a = s_a + stage * A_BYTES + cw * (64 * 128);
        const uint32_t b = s_b + stage * B_BYTES;
        fence_regs(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          // K advances 16 elements = 32 bytes inside the 128-byte swizzle row.
          wgmma_m64n256k16_ss<0>(acc, smem_desc(a + kk * 32, 16, 1024), smem_desc(b + kk * 32, 16, 1024),
                                 (k | kk) != 0);
        }
        wgmma_commit();
        wgmma_wait<1>();  // the previous stage's wgmmas are done: hand its buffers back
        fence_regs(acc);
        if (k > 0) release(prev);
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
      fence_regs(acc);
      release(prev);

#if GEMM_TMA_EPILOGUE
      // Epilogue through shared memory: the fragments go into 64x64 boxes laid out with the
      // 128-byte swizzle (conflict-free: the 8 rows of one store land in 8 different 16-byte
      // chunks), then one thread hands them to the copy engine and the warpgroup moves on while
      // the stores drain. With GEMM_TMA_EPILOGUE passes the 64x256 slice goes out in that many
      // pieces through a smaller buffer; a buffer is rewritten only after the copy engine has
      // finished reading it.
      const bool leader = (threadIdx.x & 127) == 0;
      const uint32_t cbuf = s_c + cw * C_BYTES;
      constexpr int J_PER_PASS = 32 / C_PASSES;  // 8-column fragment groups per pass
#pragma unroll
      for (int pass = 0; pass < C_PASSES; ++pass) {
        if (leader) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
        for (int jj = 0; jj < J_PER_PASS; ++jj)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int j = pass * J_PER_PASS + jj;
            const int r = warp * 16 + lane / 4 + 8 * i;
            const uint32_t addr =
                cbuf + (jj / 8) * (64 * 128) + r * 128 + (((jj % 8) ^ (r & 7)) << 4) + (lane % 4) * 4;
            const __nv_bfloat162 v = __floats2bfloat162_rn(acc[4 * j + 2 * i], acc[4 * j + 2 * i + 1]);
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(*reinterpret_cast<const uint32_t*>(&v))
                         : "memory");
          }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
        if (leader) {
#pragma unroll
          for (int box = 0; box < J_PER_PASS / 8; ++box)
            tma_store_2d(&map_c, cbuf + box * (64 * 128), n0 + (pass * J_PER_PASS / 8 + box) * 64, m0 + cw * 64);
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
      }
#else
      // Epilogue straight from the accumulator fragments: thread holds rows r and r+8 of its warp's
      // 16-row slice, two adjacent columns every 8.
      const int row = m0 + cw * 64 + warp * 16 + lane / 4;
      const int col0 = n0 + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int col = col0 + 8 * j;
        if (col < N) {
          if (row < M)
            *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(row) * N + col) =
                __floats2bfloat162_rn(acc[4 * j], acc[4 * j + 1]);
          if (row + 8 < M)
            *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(row + 8) * N + col) =
                __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
        }
      }
#endif
    }
#if GEMM_TMA_EPILOGUE
    if ((threadIdx.x & 127) == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
  }
  // Peers may still multicast into / arrive on this CTA's shared memory until both are done.
  if (CLUSTER > 1) cluster_sync();
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const DLDataType bf16{kDLBfloat, 16, 1};
  TVM_FFI_CHECK(A.dtype() == bf16 && B.dtype() == bf16 && C.dtype() == bf16, TypeError) << "A, B, C must be bfloat16";
  TVM_FFI_CHECK(A.ndim() == 2 && B.ndim() == 2 && C.ndim() == 2, ValueError) << "A, B, C must be 2-D";
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  TVM_FFI_CHECK(B.size(1) == K && C.size(0) == M && C.size(1) == N, ValueError) << "shape mismatch";
  TVM_FFI_CHECK(K % 8 == 0 && N % 8 == 0, ValueError) << "K and N must be multiples of 8";
  if (M == 0 || N == 0) return;

  const CUtensorMap map_a = make_map_2d(A.data_ptr(), M, K, K, BM, BK);
  const CUtensorMap map_b = make_map_2d(B.data_ptr(), N, K, K, B_SLICE_ROWS, BK);
  const CUtensorMap map_c = make_map_2d(C.data_ptr(), M, N, N, 64, 64);
  const int device = A.device().device_id;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));

  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = SMEM_BYTES;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;

  // Persistent grid: as many clusters as can be resident at once (asked of the occupancy API once).
  static int max_clusters = [&] {
    TVM_FFI_CHECK(cudaFuncSetAttribute(gemm_ws_persistent, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       SMEM_BYTES) == cudaSuccess, RuntimeError)
        << "cannot raise the shared-memory limit";
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaLaunchConfig_t probe = cfg;
    probe.gridDim = dim3(sms / CLUSTER * CLUSTER);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, gemm_ws_persistent, &probe) != cudaSuccess || n <= 0) n = sms / CLUSTER;
    return n;
  }();
  const int64_t num_tiles = ((M + BM * CLUSTER - 1) / (BM * CLUSTER)) * ((N + BN - 1) / BN);
  cfg.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(max_clusters, num_tiles) * CLUSTER));
  cudaError_t err = cudaLaunchKernelEx(&cfg, gemm_ws_persistent, map_a, map_b, map_c,
                                       static_cast<__nv_bfloat16*>(C.data_ptr()), static_cast<int>(M),
                                       static_cast<int>(N), static_cast<int>(K));
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
