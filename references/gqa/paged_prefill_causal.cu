// Causal GQA prefill over a paged KV cache (page size 1) for gqa_paged_prefill_causal_h24_kv8_d128_ps1,
// Hopper sm_90a.
//
// q [total_q, H, 128] bf16; k_cache, v_cache [num_pages, 1, Hkv, 128] bf16; request b owns query rows
// qo_indptr[b] .. qo_indptr[b+1] and the cached tokens on pages kv_indices[kv_indptr[b] ..
// kv_indptr[b+1]]; query head h reads KV head h / (H / Hkv); query i of a request of nq queries and
// nk keys sees keys j <= i + nk - nq.
// output [total_q, H, 128] bf16, lse [total_q, H] fp32 in base 2 (FlashInfer's convention).
//
// The ragged kernel (gqa/ragged_prefill_causal.cu, after FlashAttention-3's forward), with the keys
// gathered page by page: the producer warp's 32 lanes issue one TMA box per token and D half (64 dims
// of one KV head, one token) to that token's row of the 128-row tile. The 128-byte swizzle follows
// the shared-memory address, so rows written one at a time form the same swizzled tile a 128-row box
// would (Blackwell's TMA gather4 would take four rows per instruction). A key block's rows past its
// request repeat the request's last token (finite; the mask hides them).
//  * 3-D tensor maps (dim, head, token): a 128-token box of one head of q, a 1-token box of k_cache
//    and v_cache seen as [pages, Hkv, 128] (page size 1);
//  * one CTA per (request, 128-query block) and query head: each CTA finds its request by walking
//    qo_indptr; a block's rows past its request are computed and never stored;
//  * the bottom-right mask (key j of query i kept when j <= i + nk - nq) is applied to every key
//    block that crosses the diagonal; for a stored row it also hides the next request's keys that a
//    128-key box reaches into.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#ifndef ATTN_OVERLAP
#define ATTN_OVERLAP 0  // 1: softmax of block j overlaps the PV wgmma of block j-1 in the same warpgroup
#endif
#ifndef ATTN_PINGPONG
#define ATTN_PINGPONG 1  // 1: the consumer warpgroups take turns issuing GEMMs (named barriers)
#endif
#ifndef ATTN_V_LBO
#define ATTN_V_LBO 16384  // MN-major V: byte stride between the two 64-column halves of D
#endif
#ifndef ATTN_V_SBO
#define ATTN_V_SBO 1024   // MN-major V: byte stride between groups of 8 keys
#endif

namespace {

constexpr int D = 128;
constexpr int BM = 128;  // query rows per CTA (64 per consumer warpgroup)
constexpr int BN = 128;  // keys per block
constexpr int STAGES = 2;
constexpr int THREADS = 384;
constexpr uint32_t HALF_BYTES = 128 * 128;        // [128 rows x 64 cols] bf16 box (one D half)
constexpr uint32_t TILE_BYTES = 2 * HALF_BYTES;   // 128 rows x 128 cols
constexpr int SMEM_BYTES = TILE_BYTES * (1 + 2 * STAGES) + 16 * 8 + 1024;

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

// 3-D tile load global -> shared through the tensor-memory accelerator, completing on `bar`.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
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

// D[64x128] (+)= A[64x16] (smem desc) * B[16x128] (smem desc); tb selects a transposed (MN-major) B.
template <int TB>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TB));
}

// D[64x128] (+)= A[64x16] (registers, bf16x2) * B[16x128] (smem desc); tb selects a transposed (MN-major) B.
template <int TB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
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

// A [tokens, heads, 128] bf16 tensor as a 3-D tensor map (dim, head, token) whose box is 64 dims of
// one head for `box_tokens` tokens: rows of 128 bytes in the 128-byte swizzle, as wgmma reads them.
static CUtensorMap make_map_3d(const void* base, uint64_t tokens, uint64_t heads, uint32_t box_tokens) {
  CUtensorMap map;
  cuuint64_t dims[3] = {D, heads, tokens};
  cuuint64_t strides[2] = {D * 2, heads * D * 2};
  cuuint32_t box[3] = {64, 1, box_tokens};
  cuuint32_t estr[3] = {1, 1, 1};
  CUresult r = encode_tiled_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box,
                                 estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_CHECK(r == CUDA_SUCCESS, RuntimeError) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(r);
  return map;
}

namespace {

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));  // volatile: stays where the schedule puts it
  return y;
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__global__ void __launch_bounds__(THREADS, 1)
    gqa_paged_prefill(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                      const __grid_constant__ CUtensorMap map_v, const int* __restrict__ qo_indptr,
                      const int* __restrict__ kv_indptr, const int* __restrict__ kv_indices, int requests,
                      __nv_bfloat16* __restrict__ O, float* __restrict__ LSE, int heads, int kv_heads,
                      float scale_log2) {
  // This CTA's request and query block: walk the requests' block counts.
  int request = 0, m_block = blockIdx.x, q_start = 0, nq = 0;
  for (; request < requests; ++request) {
    q_start = qo_indptr[request];
    nq = qo_indptr[request + 1] - q_start;
    const int blocks = (nq + BM - 1) / BM;
    if (m_block < blocks) break;
    m_block -= blocks;
  }
  if (request == requests) return;  // the grid is sized for the worst case
  const int kv_start = kv_indptr[request], nk = kv_indptr[request + 1] - kv_start;
  const int delta = nk - nq;  // query i sees keys j <= i + delta
  const int h = blockIdx.y, kvh = h / (heads / kv_heads);
  const int last_row = min(m_block * BM + BM - 1, nq - 1);
  const int n_blocks = max(0, min(nk, last_row + delta + 1) + BN - 1) / BN;
  if (n_blocks == 0) return;  // (rows with no keys: not in this task's workloads)

  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t s_q = raw + ((1024 - (raw & 1023)) & 1023);
  const uint32_t s_k = s_q + TILE_BYTES;
  const uint32_t s_v = s_k + STAGES * TILE_BYTES;
  const uint32_t bars = s_v + STAGES * TILE_BYTES;
  const uint32_t bar_q = bars;
  auto k_full = [&](int s) { return bars + 8 * (1 + s); };
  auto v_full = [&](int s) { return bars + 8 * (1 + STAGES + s); };
  auto k_empty = [&](int s) { return bars + 8 * (1 + 2 * STAGES + s); };
  auto v_empty = [&](int s) { return bars + 8 * (1 + 3 * STAGES + s); };

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), 8);
      mbar_init(v_empty(s), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x < 32) {  // the producer warp: lane i gathers tokens i, i + 32, ... of each block
      const int lane = threadIdx.x;
      if (lane == 0) {
        mbar_expect_tx(bar_q, TILE_BYTES);
        const int q_row = q_start + m_block * BM;
        tma_load_3d(s_q, &map_q, 0, h, q_row, bar_q);
        tma_load_3d(s_q + HALF_BYTES, &map_q, 64, h, q_row, bar_q);
      }
      for (int it = 0; it < n_blocks; ++it) {
        const int st = it % STAGES;
        const uint32_t parity = ((it / STAGES) & 1) ^ 1;
        const int first = (n_blocks - 1 - it) * BN;
        mbar_wait(k_empty(st), parity);
        mbar_wait(v_empty(st), parity);
        if (lane == 0) {
          mbar_expect_tx(k_full(st), TILE_BYTES);
          mbar_expect_tx(v_full(st), TILE_BYTES);
        }
        __syncwarp();
        for (int r = lane; r < BN; r += 32) {
          const int page = kv_indices[kv_start + min(first + r, nk - 1)];
          const uint32_t row = st * TILE_BYTES + r * 128;
          tma_load_3d(s_k + row, &map_k, 0, kvh, page, k_full(st));
          tma_load_3d(s_k + row + HALF_BYTES, &map_k, 64, kvh, page, k_full(st));
          tma_load_3d(s_v + row, &map_v, 0, kvh, page, v_full(st));
          tma_load_3d(s_v + row + HALF_BYTES, &map_v, 64, kvh, page, v_full(st));
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  const int cw = wg - 1;
  const int warp = (threadIdx.x / 32) & 3;
  const int lane = threadIdx.x & 31;
  // This thread's two query rows (fragment rows r and r + 8 of its warp's 16).
  const int q0 = m_block * BM + cw * 64 + warp * 16 + lane / 4;

  float o[64], s[64];
  uint32_t p[8][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, corr[2];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;

  auto qk = [&](int st) {
    const uint32_t a = s_q + cw * (64 * 128);
    const uint32_t b = s_k + st * TILE_BYTES;
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t off = (kk / 4) * HALF_BYTES + (kk % 4) * 32;
      wgmma_m64n128k16_ss<0>(s, smem_desc(a + off, 16, 1024), smem_desc(b + off, 16, 1024), kk != 0);
    }
    wgmma_commit();
  };
  auto pv = [&](int st) {
    const uint32_t b = s_v + st * TILE_BYTES;
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= corr[(i >> 1) & 1];
    fence_regs(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_m64n128k16_rs<1>(o, p[kk], smem_desc(b + kk * 16 * 128, ATTN_V_LBO, ATTN_V_SBO), 1);
    wgmma_commit();
  };
  // Scores of key block kb -> probabilities (in place, fp32), running max/sum and corr updated; the
  // mask is needed where the block crosses the diagonal of this CTA's first row.
  auto crosses = [&](int kb) { return kb * BN + BN - 1 > m_block * BM + cw * 64 + warp * 16 + delta; };
  auto softmax = [&](int kb, bool mask) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = m_run[i];
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          float v = s[j * 4 + i * 2 + c] * scale_log2;
          if (mask && kb * BN + 8 * j + 2 * (lane % 4) + c > q0 + 8 * i + delta) v = -INFINITY;
          s[j * 4 + i * 2 + c] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      // A row whose keys all lie below this block (the diagonal need not align with 128-key blocks)
      // has seen no key yet: exponentiate against 0, not -inf, so that nothing becomes NaN.
      const float base = mx == -INFINITY ? 0.f : mx;
      corr[i] = ex2(m_run[i] - base);
      m_run[i] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float e = ex2(s[j * 4 + i * 2 + c] - base);
          s[j * 4 + i * 2 + c] = e;
          sum += e;
        }
      l_run[i] = l_run[i] * corr[i] + sum;
    }
  };
  // Probabilities (fp32 in s) -> bf16 A fragments of the PV wgmma.
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x) p[kk][x] = pack_bf16(s[8 * kk + 2 * x], s[8 * kk + 2 * x + 1]);
  };
#if ATTN_OVERLAP
  auto keep_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x) asm volatile("" : "+r"(p[kk][x])::"memory");
  };
#endif
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };
  // Ping-pong (ATTN_PINGPONG): the two consumer warpgroups take turns issuing their GEMMs, so one
  // warpgroup's softmax runs while the other's GEMMs occupy the tensor cores. Named barrier 1 + w
  // is warpgroup w's turn: it syncs on it (128 threads) and the other warpgroup arrives (128).
  auto turn_wait = [&]() {
    if (ATTN_PINGPONG) asm volatile("bar.sync %0, 256;" ::"r"(1 + cw) : "memory");
  };
  auto turn_pass = [&]() {
    if (ATTN_PINGPONG) asm volatile("bar.arrive %0, 256;" ::"r"(2 - cw) : "memory");
  };
  if (cw == 1) turn_pass();  // warpgroup 0 goes first

  turn_wait();
  mbar_wait(bar_q, 0);
  mbar_wait(k_full(0), 0);
  qk(0);
  turn_pass();
  wgmma_wait<0>();
  fence_regs(s);
  release(k_empty(0));
  softmax(n_blocks - 1, crosses(n_blocks - 1));
  pack_p();

  for (int it = 1; it < n_blocks; ++it) {
    const int prev = (it - 1) % STAGES, st = it % STAGES;
#if ATTN_OVERLAP
    // Issue S(it) = Q K(it)^T, then O += P(it-1) V(it-1); the softmax of block it runs on the CUDA
    // cores while the PV product is still on the tensor cores.
    turn_wait();
    mbar_wait(k_full(st), (it / STAGES) & 1);
    qk(st);
    mbar_wait(v_full(prev), ((it - 1) / STAGES) & 1);
    pv(prev);
    turn_pass();
    wgmma_wait<1>();  // S(it) is ready (PV may still run)
    fence_regs(s);
    release(k_empty(st));
    softmax(n_blocks - 1 - it, crosses(n_blocks - 1 - it));
    wgmma_wait<0>();
    fence_regs(o);
    keep_p();  // P(it-1) stays untouched until its wgmma has retired
    release(v_empty(prev));
    pack_p();
#else
    turn_wait();
    mbar_wait(v_full(prev), ((it - 1) / STAGES) & 1);
    pv(prev);
    mbar_wait(k_full(st), (it / STAGES) & 1);
    qk(st);
    turn_pass();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(s);
    release(v_empty(prev));
    release(k_empty(st));
    softmax(n_blocks - 1 - it, crosses(n_blocks - 1 - it));
    pack_p();
#endif
  }
  {
    const int last = (n_blocks - 1) % STAGES;
    turn_wait();
    mbar_wait(v_full(last), ((n_blocks - 1) / STAGES) & 1);
    pv(last);
    if (cw == 0) turn_pass();  // balances the initial pass of warpgroup 1
    wgmma_wait<0>();
    fence_regs(o);
    release(v_empty(last));
  }

  // Finish: full row sums, normalise, store this request's rows of O and the base-2 LSE.
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffff, l, 1);
    l += __shfl_xor_sync(0xffffffff, l, 2);
    inv[i] = 1.f / l;
    const int row = q0 + 8 * i;
    if (lane % 4 == 0 && row < nq) LSE[static_cast<size_t>(q_start + row) * heads + h] = m_run[i] + __log2f(l);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = q0 + 8 * i;
    if (row >= nq) continue;
    __nv_bfloat16* dst = O + (static_cast<size_t>(q_start + row) * heads + h) * D + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j) =
          __floats2bfloat162_rn(o[j * 4 + i * 2] * inv[i], o[j * 4 + i * 2 + 1] * inv[i]);
  }
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k_cache, tvm::ffi::TensorView v_cache,
         tvm::ffi::TensorView qo_indptr, tvm::ffi::TensorView kv_indptr, tvm::ffi::TensorView kv_indices, double sm_scale,
         tvm::ffi::TensorView output, tvm::ffi::TensorView lse) {
  const DLDataType bf16{kDLBfloat, 16, 1}, f32{kDLFloat, 32, 1}, i32{kDLInt, 32, 1};
  TVM_FFI_CHECK(q.dtype() == bf16 && k_cache.dtype() == bf16 && v_cache.dtype() == bf16 && output.dtype() == bf16,
                TypeError)
      << "q, k_cache, v_cache, output must be bfloat16";
  TVM_FFI_CHECK(lse.dtype() == f32 && qo_indptr.dtype() == i32 && kv_indptr.dtype() == i32 &&
                    kv_indices.dtype() == i32,
                TypeError)
      << "lse must be float32, the indptrs and indices int32";
  const int64_t total_q = q.size(0), heads = q.size(1), pages = k_cache.size(0), kv_heads = k_cache.size(2);
  const int64_t requests = qo_indptr.size(0) - 1;
  TVM_FFI_CHECK(q.size(2) == D && k_cache.size(3) == D && k_cache.size(1) == 1 && heads % kv_heads == 0, ValueError)
      << "head dim 128, page size 1, query heads a multiple of KV heads";
  if (total_q == 0 || requests <= 0) return;
  const CUtensorMap mq = make_map_3d(q.data_ptr(), total_q, heads, BM);
  const CUtensorMap mk = make_map_3d(k_cache.data_ptr(), pages, kv_heads, 1);
  const CUtensorMap mv = make_map_3d(v_cache.data_ptr(), pages, kv_heads, 1);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, q.device().device_id));
  static const bool ready = [] {
    return cudaFuncSetAttribute(gqa_paged_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) ==
           cudaSuccess;
  }();
  TVM_FFI_CHECK(ready, RuntimeError) << "cannot raise the shared-memory limit";
  // Every request's last block may be partial: at most total_q / 128 + requests blocks.
  const dim3 grid(static_cast<unsigned>(total_q / BM + requests), static_cast<unsigned>(heads));
  const float scale_log2 = static_cast<float>(sm_scale) * 1.4426950408889634f;
  gqa_paged_prefill<<<grid, THREADS, SMEM_BYTES, stream>>>(
      mq, mk, mv, static_cast<const int*>(qo_indptr.data_ptr()), static_cast<const int*>(kv_indptr.data_ptr()),
      static_cast<const int*>(kv_indices.data_ptr()), static_cast<int>(requests),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<float*>(lse.data_ptr()), static_cast<int>(heads),
      static_cast<int>(kv_heads), scale_log2);
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
