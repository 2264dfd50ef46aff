// Attention backward on Blackwell sm_100a, head dim 128 (task mha_bwd_d128 and, with the switch below on,
// mha_bwd_d128_causal: key j is visible to query i iff j <= i). Built and static-checked only: no Blackwell
// GPU has run it (tests/test_blackwell_attention_references.py).
//
// Q, K, V, O, dO [B, H, S, 128] bf16 and LSE [B, H, S] fp32 (natural log, from the forward) give dQ, dK, dV
// [B, H, S, 128] bf16, with P = exp(Q K^T / sqrt(128) - LSE), dV = P^T dO, dP = dO V^T,
// dS = P * (dP - rowsum(dO * O)), dQ = dS K / sqrt(128), dK = dS^T Q / sqrt(128).
//
// Two kernels, no atomics and no workspace; every product is a tcgen05.mma kind::f16 (SASS UTCHMMA) from
// no-swizzle K-major shared-memory tiles, and every accumulator lives in Tensor Memory, so a thread holds
// one row of scores at a time and nothing else:
//  * dk_dv: one CTA of 128 threads per 128 keys of one (batch, head); thread t owns key t (TMEM lane t).
//    Per block of 64 queries: S^T = K Q^T and dP^T = V dO^T (8 MMAs each, M 128, N 64, K 16) into TMEM;
//    each thread turns its row into P^T and dS^T (bf16, shared memory); dV += P^T dO and dK += dS^T Q
//    (4 MMAs each, M 128, N 128) accumulate in TMEM across the blocks. Q and dO are staged twice, as they
//    are (B of the first two products) and transposed (B of the last two).
//  * dq: one CTA per 128 queries; thread t owns query t. Per block of 64 keys: S = Q K^T and dP = dO V^T
//    into TMEM; each thread forms its row of dS (its rowsum(dO * O) computed once at the start); dQ += dS K
//    (K transposed while staged) accumulates in TMEM.
// One thread issues every MMA; every wait is on the CTA's one mbarrier, its phase flipping per commit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#define ATTN_CAUSAL true  // this file is the causal variant

namespace {

constexpr int D = 128;     // head dim
constexpr int ROWS = 128;  // the rows a CTA owns (TMEM lanes): keys in dk_dv, queries in dq
constexpr int BLOCK = 64;  // the other side's rows per step: queries in dk_dv, keys in dq
constexpr int MMA_K = 16;  // K of one kind::f16 MMA
constexpr float LOG2E = 1.4426950408889634f;

// Shared-memory operand layout: a [rows x cols] K-major tile as cols/16 slices of 16 K-elements; in a
// slice, 8x8 core matrices (8 rows of 16 bytes), the two along K 128 bytes apart (the descriptor's leading
// byte offset), 8-row groups 256 bytes apart (its stride byte offset).
template <int R>
__device__ __forceinline__ int core_offset(int row, int col) {
  return (col / MMA_K) * (R * MMA_K) + ((row >> 3) * 2 + ((col >> 3) & 1)) * 64 + (row & 7) * 8 + (col & 7);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint64_t smem_descriptor(const void* slice) {
  uint64_t desc = static_cast<uint64_t>((smem_u32(slice) & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(128 >> 4) << 16;  // leading byte offset: the next core matrix along K
  desc |= static_cast<uint64_t>(256 >> 4) << 32;  // stride byte offset: the next 8-row group
  desc |= static_cast<uint64_t>(1) << 46;         // tcgen05 descriptor version; no swizzle
  return desc;
}

// kind::f16 instruction descriptor: fp32 D, bf16 A and B, both K-major, N and M.
__host__ __device__ constexpr uint32_t instr_desc(int n, int m) {
  return (1u << 4) | (1u << 7) | (1u << 10) | (static_cast<uint32_t>(n >> 3) << 17) |
         (static_cast<uint32_t>(m >> 4) << 24);
}

__device__ __forceinline__ void mma(uint32_t tmem, const void* a, const void* b, uint32_t idesc, bool accumulate) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %4, 0;\n"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, acc;\n}\n" ::"r"(tmem),
      "l"(smem_descriptor(a)), "l"(smem_descriptor(b)), "r"(idesc), "r"(accumulate ? 1u : 0u)
      : "memory");
}

__device__ __forceinline__ void commit(uint32_t bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(bar)
               : "memory");
}

__device__ __forceinline__ void wait_phase(uint32_t bar, uint32_t phase) {
  asm volatile(
      "{\n.reg .pred done;\nwait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n}\n" ::"r"(bar),
      "r"(phase)
      : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
}

// STEPS MMAs of K-major tiles (A: A_ROWS rows, B: B_ROWS rows, slices of K 16) into TMEM at `tmem`, the first
// adding to what is there when `accumulate`; issued by thread 0, not waited for.
template <int STEPS, int A_ROWS, int B_ROWS>
__device__ __forceinline__ void issue(uint32_t tmem, const __nv_bfloat16* a, const __nv_bfloat16* b, bool accumulate) {
#pragma unroll
  for (int s = 0; s < STEPS; ++s) {
    mma(tmem, a + s * A_ROWS * MMA_K, b + s * B_ROWS * MMA_K, instr_desc(B_ROWS, A_ROWS), accumulate || s > 0);
  }
}

// Thread 0 commits what it issued; every thread waits for it.
__device__ __forceinline__ void complete(uint32_t bar, uint32_t& phase) {
  if (threadIdx.x == 0) commit(bar);
  wait_phase(bar, phase);
  phase ^= 1;
}

// 16 consecutive fp32 columns of this thread's TMEM lane.
__device__ __forceinline__ void load16(uint32_t address, float* out) {
  uint32_t v[16];
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15}, [%16];\n"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]), "=r"(v[8]),
        "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
      : "r"(address));
  asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory");
#pragma unroll
  for (int j = 0; j < 16; ++j) out[j] = __uint_as_float(v[j]);
}

// R x D bf16 rows of global memory (D contiguous) into a K-major tile, 16 bytes at a time.
template <int R>
__device__ __forceinline__ void stage_rows(__nv_bfloat16* tile, const __nv_bfloat16* rows) {
  for (int i = threadIdx.x; i < R * D / 8; i += blockDim.x) {
    const int row = i / (D / 8), col = (i % (D / 8)) * 8;
    *reinterpret_cast<uint4*>(tile + core_offset<R>(row, col)) =
        *reinterpret_cast<const uint4*>(rows + static_cast<size_t>(row) * D + col);
  }
}

// The same R rows transposed: a [D x R] K-major tile (the rows become the K dimension).
template <int R>
__device__ __forceinline__ void stage_transposed(__nv_bfloat16* tile, const __nv_bfloat16* rows) {
  for (int i = threadIdx.x; i < R * D; i += blockDim.x) {
    const int row = i / D, d = i % D;
    tile[core_offset<D>(d, row)] = rows[static_cast<size_t>(row) * D + d];
  }
}

// This thread's row of an fp32 TMEM accumulator, times `scale`, as bf16 to global memory.
__device__ __forceinline__ void store_row(uint32_t tmem_row, float scale, __nv_bfloat16* out) {
#pragma unroll
  for (int c = 0; c < D; c += 16) {
    float values[16];
    load16(tmem_row + c, values);
    __align__(16) __nv_bfloat16 packed[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) packed[j] = __float2bfloat16(values[j] * scale);
    *reinterpret_cast<uint4*>(out + c) = *reinterpret_cast<const uint4*>(packed);
    *reinterpret_cast<uint4*>(out + c + 8) = *reinterpret_cast<const uint4*>(packed + 8);
  }
}

// A row of BLOCK bf16 values into a [ROWS x BLOCK] K-major tile at row `row`.
__device__ __forceinline__ void put_row(__nv_bfloat16* tile, int row, const float* values) {
#pragma unroll
  for (int c = 0; c < BLOCK; c += 8) {
    __align__(16) __nv_bfloat16 packed[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) packed[j] = __float2bfloat16(values[c + j]);
    *reinterpret_cast<uint4*>(tile + core_offset<ROWS>(row, c)) = *reinterpret_cast<const uint4*>(packed);
  }
}

__device__ __forceinline__ void alloc_tmem(uint32_t* base, uint32_t columns) {
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(smem_u32(base)),
                 "r"(columns));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
  }
}

__device__ __forceinline__ void free_tmem(uint32_t tmem, uint32_t columns) {
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "r"(columns));
  }
}

// Generic-proxy writes to the tiles, then every thread past the barrier: the MMAs may read them.
__device__ __forceinline__ void publish_tiles() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
}

// ---------------------------------------------------------------------------------------------- dK, dV

constexpr uint32_t KV_TMEM_COLUMNS = 512;
constexpr uint32_t DV_COLUMN = 0, DK_COLUMN = 128, ST_COLUMN = 256, DPT_COLUMN = 320;
constexpr size_t KV_SMEM_BYTES = (2 * ROWS * D + 4 * BLOCK * D + 2 * ROWS * BLOCK) * 2 + 2 * BLOCK * 4 + 128;

template <bool CAUSAL>
__global__ void __launch_bounds__(ROWS)
    dk_dv_tcgen05(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                  const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ o,
                  const __nv_bfloat16* __restrict__ d_o, const float* __restrict__ lse, __nv_bfloat16* __restrict__ dk,
                  __nv_bfloat16* __restrict__ dv, int seq, float scale) {
  extern __shared__ __align__(128) uint8_t smem[];
  __nv_bfloat16* sk = reinterpret_cast<__nv_bfloat16*>(smem);  // A of S^T
  __nv_bfloat16* sv = sk + ROWS * D;                             // A of dP^T
  __nv_bfloat16* sq = sv + ROWS * D;                             // B of S^T
  __nv_bfloat16* sdo = sq + BLOCK * D;                           // B of dP^T
  __nv_bfloat16* sqt = sdo + BLOCK * D;                          // B of dK: Q transposed
  __nv_bfloat16* sdot = sqt + BLOCK * D;                         // B of dV: dO transposed
  __nv_bfloat16* spt = sdot + BLOCK * D;                         // A of dV: P^T
  __nv_bfloat16* sdst = spt + ROWS * BLOCK;                      // A of dK: dS^T
  float* s_lse = reinterpret_cast<float*>(sdst + ROWS * BLOCK);  // the block's LSE, log2 domain
  float* s_delta = s_lse + BLOCK;                                // the block's rowsum(dO * O)
  __shared__ alignas(8) uint64_t bar_storage;
  __shared__ uint32_t tmem_base;
  const int tid = threadIdx.x;
  const size_t head = static_cast<size_t>(blockIdx.y) * seq * D;
  const size_t head_rows = static_cast<size_t>(blockIdx.y) * seq;
  const int k0 = blockIdx.x * ROWS;
  const int key = k0 + tid;
  const uint32_t bar = smem_u32(&bar_storage);
  const float scale_log2 = scale * LOG2E;

  alloc_tmem(&tmem_base, KV_TMEM_COLUMNS);
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar));
  stage_rows<ROWS>(sk, k + head + static_cast<size_t>(k0) * D);
  stage_rows<ROWS>(sv, v + head + static_cast<size_t>(k0) * D);
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
  const uint32_t tmem = tmem_base;
  const uint32_t lane = static_cast<uint32_t>((tid / 32) * 32) << 16;  // this warp's 32 TMEM lanes
  uint32_t phase = 0;

  // A causal key block is seen only by the queries at or after its first key.
  for (int q0 = CAUSAL ? k0 : 0; q0 < seq; q0 += BLOCK) {
    // The last block's MMAs were waited for and its TMEM reads are done: the tiles may be overwritten.
    asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
    __syncthreads();
    const __nv_bfloat16* q_rows = q + head + static_cast<size_t>(q0) * D;
    const __nv_bfloat16* do_rows = d_o + head + static_cast<size_t>(q0) * D;
    stage_rows<BLOCK>(sq, q_rows);
    stage_rows<BLOCK>(sdo, do_rows);
    stage_transposed<BLOCK>(sqt, q_rows);
    stage_transposed<BLOCK>(sdot, do_rows);
    {  // rowsum(dO * O) of the block's queries: two threads a query, half the head dim each
      const int query = tid / 2, half = (tid & 1) * (D / 2);
      const __nv_bfloat16* a = do_rows + static_cast<size_t>(query) * D + half;
      const __nv_bfloat16* b = o + head + static_cast<size_t>(q0 + query) * D + half;
      float sum = 0.f;
      for (int d = 0; d < D / 2; ++d) sum += __bfloat162float(a[d]) * __bfloat162float(b[d]);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if ((tid & 1) == 0) {
        s_delta[query] = sum;
        s_lse[query] = lse[head_rows + q0 + query] * LOG2E;
      }
    }
    publish_tiles();
    if (tid == 0) {
      asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
      issue<D / MMA_K, ROWS, BLOCK>(tmem + ST_COLUMN, sk, sq, false);    // S^T = K Q^T
      issue<D / MMA_K, ROWS, BLOCK>(tmem + DPT_COLUMN, sv, sdo, false);  // dP^T = V dO^T
    }
    complete(bar, phase);

    float p[BLOCK], ds[BLOCK];
#pragma unroll
    for (int c = 0; c < BLOCK; c += 16) {
      load16(tmem + lane + ST_COLUMN + c, p + c);
      load16(tmem + lane + DPT_COLUMN + c, ds + c);
    }
#pragma unroll
    for (int j = 0; j < BLOCK; ++j) {
      const bool seen = !CAUSAL || q0 + j >= key;
      p[j] = seen ? exp2f(p[j] * scale_log2 - s_lse[j]) : 0.f;
      ds[j] = p[j] * (ds[j] - s_delta[j]);
    }
    put_row(spt, tid, p);
    put_row(sdst, tid, ds);
    publish_tiles();
    if (tid == 0) {
      asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
      const bool more = q0 != (CAUSAL ? k0 : 0);  // the first block writes the accumulators afresh
      issue<BLOCK / MMA_K, ROWS, D>(tmem + DV_COLUMN, spt, sdot, more);  // dV += P^T dO
      issue<BLOCK / MMA_K, ROWS, D>(tmem + DK_COLUMN, sdst, sqt, more);  // dK += dS^T Q
    }
    complete(bar, phase);
  }

  store_row(tmem + lane + DV_COLUMN, 1.f, dv + head + static_cast<size_t>(key) * D);
  store_row(tmem + lane + DK_COLUMN, scale, dk + head + static_cast<size_t>(key) * D);
  free_tmem(tmem, KV_TMEM_COLUMNS);
}

// -------------------------------------------------------------------------------------------------- dQ

constexpr uint32_t Q_TMEM_COLUMNS = 256;
constexpr uint32_t DQ_COLUMN = 0, S_COLUMN = 128, DP_COLUMN = 192;
constexpr size_t Q_SMEM_BYTES = (2 * ROWS * D + 3 * BLOCK * D + ROWS * BLOCK) * 2 + 128;

template <bool CAUSAL>
__global__ void __launch_bounds__(ROWS)
    dq_tcgen05(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
               const __nv_bfloat16* __restrict__ v, const __nv_bfloat16* __restrict__ o,
               const __nv_bfloat16* __restrict__ d_o, const float* __restrict__ lse, __nv_bfloat16* __restrict__ dq,
               int seq, float scale) {
  extern __shared__ __align__(128) uint8_t smem[];
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem);  // A of S
  __nv_bfloat16* sdo = sq + ROWS * D;                            // A of dP
  __nv_bfloat16* sk = sdo + ROWS * D;                            // B of S
  __nv_bfloat16* sv = sk + BLOCK * D;                            // B of dP
  __nv_bfloat16* skt = sv + BLOCK * D;                           // B of dQ: K transposed
  __nv_bfloat16* sds = skt + BLOCK * D;                          // A of dQ: dS
  __shared__ alignas(8) uint64_t bar_storage;
  __shared__ uint32_t tmem_base;
  const int tid = threadIdx.x;
  const size_t head = static_cast<size_t>(blockIdx.y) * seq * D;
  const int q0 = blockIdx.x * ROWS;
  const int query = q0 + tid;
  const uint32_t bar = smem_u32(&bar_storage);
  const float scale_log2 = scale * LOG2E;

  alloc_tmem(&tmem_base, Q_TMEM_COLUMNS);
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar));
  stage_rows<ROWS>(sq, q + head + static_cast<size_t>(q0) * D);
  stage_rows<ROWS>(sdo, d_o + head + static_cast<size_t>(q0) * D);
  // This thread's rowsum(dO * O) and LSE (log2 domain), once.
  float delta = 0.f;
  {
    const __nv_bfloat16* a = d_o + head + static_cast<size_t>(query) * D;
    const __nv_bfloat16* b = o + head + static_cast<size_t>(query) * D;
    for (int d = 0; d < D; ++d) delta += __bfloat162float(a[d]) * __bfloat162float(b[d]);
  }
  const float row_lse = lse[static_cast<size_t>(blockIdx.y) * seq + query] * LOG2E;
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
  const uint32_t tmem = tmem_base;
  const uint32_t lane = static_cast<uint32_t>((tid / 32) * 32) << 16;
  uint32_t phase = 0;
  const int keys = CAUSAL ? q0 + ROWS : seq;  // a causal CTA's last key block ends at its last row

  for (int k0 = 0; k0 < keys; k0 += BLOCK) {
    asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
    __syncthreads();
    const __nv_bfloat16* k_rows = k + head + static_cast<size_t>(k0) * D;
    stage_rows<BLOCK>(sk, k_rows);
    stage_rows<BLOCK>(sv, v + head + static_cast<size_t>(k0) * D);
    stage_transposed<BLOCK>(skt, k_rows);
    publish_tiles();
    if (tid == 0) {
      asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
      issue<D / MMA_K, ROWS, BLOCK>(tmem + S_COLUMN, sq, sk, false);    // S = Q K^T
      issue<D / MMA_K, ROWS, BLOCK>(tmem + DP_COLUMN, sdo, sv, false);  // dP = dO V^T
    }
    complete(bar, phase);

    float p[BLOCK], ds[BLOCK];
#pragma unroll
    for (int c = 0; c < BLOCK; c += 16) {
      load16(tmem + lane + S_COLUMN + c, p + c);
      load16(tmem + lane + DP_COLUMN + c, ds + c);
    }
#pragma unroll
    for (int j = 0; j < BLOCK; ++j) {
      const bool seen = !CAUSAL || k0 + j <= query;
      const float weight = seen ? exp2f(p[j] * scale_log2 - row_lse) : 0.f;
      ds[j] = weight * (ds[j] - delta);
    }
    put_row(sds, tid, ds);
    publish_tiles();
    if (tid == 0) {
      asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
      issue<BLOCK / MMA_K, ROWS, D>(tmem + DQ_COLUMN, sds, skt, k0 != 0);  // dQ += dS K
    }
    complete(bar, phase);
  }

  store_row(tmem + lane + DQ_COLUMN, scale, dq + head + static_cast<size_t>(query) * D);
  free_tmem(tmem, Q_TMEM_COLUMNS);
}

template <typename Kernel>
void raise_smem_limit(Kernel kernel, size_t bytes) {
  TVM_FFI_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) ==
                    cudaSuccess,
                RuntimeError)
      << "cannot raise the shared-memory limit";
}

}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView O,
         tvm::ffi::TensorView dO, tvm::ffi::TensorView LSE, tvm::ffi::TensorView dQ, tvm::ffi::TensorView dK,
         tvm::ffi::TensorView dV) {
  const DLDataType bf16{kDLBfloat, 16, 1}, f32{kDLFloat, 32, 1};
  for (const tvm::ffi::TensorView* x : {&Q, &K, &V, &O, &dO, &dQ, &dK, &dV}) {
    TVM_FFI_CHECK(x->dtype() == bf16, TypeError) << "Q, K, V, O, dO, dQ, dK, dV must be bfloat16";
    TVM_FFI_CHECK(x->ndim() == 4 && x->size(3) == D, ValueError) << "tensors are [B, H, S, 128]";
  }
  TVM_FFI_CHECK(LSE.dtype() == f32 && LSE.ndim() == 3, TypeError) << "LSE must be float32 [B, H, S]";
  const int64_t batch = Q.size(0), heads = Q.size(1), seq = Q.size(2);
  for (const tvm::ffi::TensorView* x : {&K, &V, &O, &dO, &dQ, &dK, &dV})
    TVM_FFI_CHECK(x->size(0) == batch && x->size(1) == heads && x->size(2) == seq, ValueError)
        << "every tensor must share [B, H, S]";
  TVM_FFI_CHECK(LSE.size(0) == batch && LSE.size(1) == heads && LSE.size(2) == seq, ValueError)
      << "LSE must be [B, H, S]";
  TVM_FFI_CHECK(seq % ROWS == 0, ValueError) << "S must be a multiple of 128";
  if (batch * heads * seq == 0) return;
  const int device = Q.device().device_id;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  raise_smem_limit(dk_dv_tcgen05<ATTN_CAUSAL>, KV_SMEM_BYTES);
  raise_smem_limit(dq_tcgen05<ATTN_CAUSAL>, Q_SMEM_BYTES);
  const float scale = 1.f / sqrtf(static_cast<float>(D));
  const dim3 grid(static_cast<unsigned>(seq / ROWS), static_cast<unsigned>(batch * heads));
  const auto* q = static_cast<const __nv_bfloat16*>(Q.data_ptr());
  const auto* k = static_cast<const __nv_bfloat16*>(K.data_ptr());
  const auto* v = static_cast<const __nv_bfloat16*>(V.data_ptr());
  const auto* o = static_cast<const __nv_bfloat16*>(O.data_ptr());
  const auto* d_o = static_cast<const __nv_bfloat16*>(dO.data_ptr());
  const auto* lse = static_cast<const float*>(LSE.data_ptr());
  dk_dv_tcgen05<ATTN_CAUSAL><<<grid, ROWS, KV_SMEM_BYTES, stream>>>(
      q, k, v, o, d_o, lse, static_cast<__nv_bfloat16*>(dK.data_ptr()), static_cast<__nv_bfloat16*>(dV.data_ptr()),
      static_cast<int>(seq), scale);
  dq_tcgen05<ATTN_CAUSAL><<<grid, ROWS, Q_SMEM_BYTES, stream>>>(
      q, k, v, o, d_o, lse, static_cast<__nv_bfloat16*>(dQ.data_ptr()), static_cast<int>(seq), scale);
  const cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
