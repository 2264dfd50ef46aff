// Causal GQA prefill on Blackwell sm_100a, head dim 128: gqa_ragged_prefill_causal_h32_kv4_d128 and, with the
// switch below on, gqa_paged_prefill_causal_h24_kv8_d128_ps1.
// Built and static-checked only: no Blackwell GPU has run it (tests/test_blackwell_gqa_references.py).
//
// q [total_q, H, 128] bf16; request b owns query rows qo_indptr[b] .. qo_indptr[b+1] and keys
// kv_indptr[b] .. kv_indptr[b+1]: rows of the packed k, v [total_kv, Hkv, 128] (ragged) or the pages
// kv_indices[kv_indptr[b] ..] of k_cache, v_cache [pages, 1, Hkv, 128] (paged, page size 1). Query head h
// reads KV head h / (H / Hkv); query i of a request of nq queries and nk keys sees keys j <= i + nk - nq.
// output [total_q, H, 128] bf16, lse [total_q, H] fp32 in base 2 (FlashInfer's convention).
//
// The Blackwell attention forward of references/attention/mha_fwd_d128_causal_tcgen05.cu (one CTA of 128
// threads per 128 query rows; thread t owns query row t, TMEM lane t; S = Q K^T and PV = P V on
// tcgen05.mma kind::f16 into TMEM, the online softmax per thread, O in registers), with what GQA over
// ragged or paged requests changes:
//  * one CTA per (request, 128-query block) and query head: each CTA finds its request by walking
//    qo_indptr; a block's rows past its request repeat its last query and are never stored;
//  * keys are gathered row by row (a token's 128 dims of one KV head are contiguous in both layouts), V
//    transposed while copied so both products read K-major operands; keys past the request repeat its
//    last key and are masked;
//  * the bottom-right causal mask, and the key loop ending at the block's last row's last key.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#define GQA_PAGED false  // this file is the ragged variant

namespace {

constexpr int D = 128;        // head dim
constexpr int BM = 128;       // query rows per CTA (TMEM lanes)
constexpr int BN = 64;        // keys per block
constexpr int MMA_K = 16;     // K of one kind::f16 MMA
constexpr uint32_t TMEM_COLUMNS = 256;
constexpr uint32_t S_COLUMN = 0;     // S: BN columns
constexpr uint32_t PV_COLUMN = 128;  // PV: D columns

// Shared-memory operand layout: a [rows x cols] K-major tile as cols/16 slices of 16 K-elements; in a
// slice, 8x8 core matrices (8 rows of 16 bytes), the two along K 128 bytes apart (the descriptor's leading
// byte offset), 8-row groups 256 bytes apart (its stride byte offset).
template <int ROWS>
__device__ __forceinline__ int core_offset(int row, int col) {
  return (col / MMA_K) * (ROWS * MMA_K) + ((row >> 3) * 2 + ((col >> 3) & 1)) * 64 + (row & 7) * 8 + (col & 7);
}

constexpr int Q_ELEMS = BM * D;
constexpr int K_ELEMS = BN * D;
constexpr int VT_ELEMS = D * BN;
constexpr int P_ELEMS = BM * BN;
constexpr size_t SMEM_BYTES = static_cast<size_t>(Q_ELEMS + K_ELEMS + VT_ELEMS + P_ELEMS) * 2 + 128;

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

// One product of K-major tiles (A: A_ROWS rows, B: B_ROWS rows, STEPS slices of K 16) into TMEM at `tmem`,
// issued by thread 0 and waited for by every thread.
template <int STEPS, int A_ROWS, int B_ROWS>
__device__ __forceinline__ void product(uint32_t tmem, const __nv_bfloat16* a, const __nv_bfloat16* b, uint32_t bar,
                                        uint32_t& phase) {
  if (threadIdx.x == 0) {
    asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
      mma(tmem, a + s * A_ROWS * MMA_K, b + s * B_ROWS * MMA_K, instr_desc(B_ROWS, A_ROWS), s > 0);
    }
    commit(bar);
  }
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

// Where a request's key j (from 0) lies: row kv_start + j of the packed k and v, or the page that
// kv_indices names for it (page size 1). Rows of one KV head are D contiguous elements.
struct KeyRows {
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const int* kv_indices;  // paged only
  int kv_start, kv_heads, kv_head;

  __device__ __forceinline__ size_t offset(int j) const {
    const int slot = GQA_PAGED ? kv_indices[kv_start + j] : kv_start + j;
    return (static_cast<size_t>(slot) * kv_heads + kv_head) * D;
  }
};

__global__ void __launch_bounds__(BM) gqa_prefill_tcgen05(const __nv_bfloat16* __restrict__ q, KeyRows keys,
                                                          const int* __restrict__ qo_indptr,
                                                          const int* __restrict__ kv_indptr, int requests,
                                                          __nv_bfloat16* __restrict__ out, float* __restrict__ lse,
                                                          int heads, float scale_log2) {
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
  keys.kv_start = kv_indptr[request];
  const int nk = kv_indptr[request + 1] - keys.kv_start;
  const int delta = nk - nq;  // query i sees keys j <= i + delta
  const int first_row = m_block * BM;
  const int key_end = min(nk, min(first_row + BM, nq) - 1 + delta + 1);  // past the block's last row's last key
  if (key_end <= 0) return;  // no row of the block sees a key (not in this task's workloads)

  extern __shared__ __align__(128) uint8_t smem[];
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sk = sq + Q_ELEMS;
  __nv_bfloat16* svt = sk + K_ELEMS;  // V transposed: D rows of BN keys
  __nv_bfloat16* sp = svt + VT_ELEMS;
  __shared__ alignas(8) uint64_t bar_storage;
  __shared__ uint32_t tmem_base;
  const int tid = threadIdx.x, warp = tid / 32;
  const int h = blockIdx.y;
  keys.kv_head = h / (heads / keys.kv_heads);
  const int row = first_row + tid;  // this thread's query, from the request's first
  const uint32_t bar = smem_u32(&bar_storage);

  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(smem_u32(&tmem_base)),
                 "r"(TMEM_COLUMNS));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
  }
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar));
  // Q's rows past the request repeat its last query (finite; never stored), 16 bytes at a time.
  for (int i = tid; i < BM * D / 8; i += BM) {
    const int r = i / (D / 8), col = (i % (D / 8)) * 8;
    const size_t token = static_cast<size_t>(q_start + min(first_row + r, nq - 1));
    *reinterpret_cast<uint4*>(sq + core_offset<BM>(r, col)) =
        *reinterpret_cast<const uint4*>(q + (token * heads + h) * D + col);
  }
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
  const uint32_t tmem = tmem_base;
  const uint32_t lane_base = static_cast<uint32_t>(warp * 32) << 16;  // this warp's 32 TMEM lanes

  float acc[D];
#pragma unroll
  for (int j = 0; j < D; ++j) acc[j] = 0.f;
  float row_max = -INFINITY, row_sum = 0.f;
  uint32_t phase = 0;

  for (int k0 = 0; k0 < key_end; k0 += BN) {
    // The last block's MMAs were waited for and its TMEM reads are done: the tiles may be overwritten.
    asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
    __syncthreads();
    // K as it is and V transposed, 8 dims of one key per thread and step; keys past the request repeat
    // its last one (finite; the mask hides them).
    for (int i = tid; i < BN * D / 8; i += BM) {
      const int key = i / (D / 8), col = (i % (D / 8)) * 8;
      const size_t at = keys.offset(min(k0 + key, nk - 1)) + col;
      *reinterpret_cast<uint4*>(sk + core_offset<BN>(key, col)) = *reinterpret_cast<const uint4*>(keys.k + at);
      __align__(16) __nv_bfloat16 dims[8];
      *reinterpret_cast<uint4*>(dims) = *reinterpret_cast<const uint4*>(keys.v + at);
#pragma unroll
      for (int e = 0; e < 8; ++e) svt[core_offset<D>(col + e, key)] = dims[e];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> the MMA's reads
    __syncthreads();
    product<D / MMA_K, BM, BN>(tmem + S_COLUMN, sq, sk, bar, phase);  // S = Q K^T

    // The online softmax of this thread's row, in the exp2 domain with the scale folded in.
    float scores[BN];
#pragma unroll
    for (int c = 0; c < BN; c += 16) load16(tmem + lane_base + S_COLUMN + c, scores + c);
    float block_max = row_max;
#pragma unroll
    for (int j = 0; j < BN; ++j) {
      const int key = k0 + j;
      scores[j] = (key >= nk || key > row + delta) ? -INFINITY : scores[j] * scale_log2;
      block_max = fmaxf(block_max, scores[j]);
    }
    // A row that has seen no key yet keeps a max of -inf: subtract 0 instead, so its P is 0, not NaN.
    const float base = block_max == -INFINITY ? 0.f : block_max;
    const float rescale = exp2f(row_max - base);
    row_max = block_max;
    row_sum *= rescale;
#pragma unroll
    for (int c = 0; c < BN; c += 8) {
      __align__(16) __nv_bfloat16 packed[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const __nv_bfloat16 p = __float2bfloat16(exp2f(scores[c + j] - base));
        row_sum += __bfloat162float(p);  // the sum of what the MMA multiplies
        packed[j] = p;
      }
      *reinterpret_cast<uint4*>(sp + core_offset<BM>(tid, c)) = *reinterpret_cast<const uint4*>(packed);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
    __syncthreads();
    product<BN / MMA_K, BM, D>(tmem + PV_COLUMN, sp, svt, bar, phase);  // PV = P V
#pragma unroll
    for (int c = 0; c < D; c += 16) {
      float pv[16];
      load16(tmem + lane_base + PV_COLUMN + c, pv);
#pragma unroll
      for (int j = 0; j < 16; ++j) acc[c + j] = acc[c + j] * rescale + pv[j];
    }
  }

  if (row < nq) {
    const size_t token = static_cast<size_t>(q_start + row);
    const float inverse = row_sum > 0.f ? 1.f / row_sum : 0.f;
    __nv_bfloat16* dst = out + (token * heads + h) * D;
#pragma unroll
    for (int c = 0; c < D; c += 8) {
      __align__(16) __nv_bfloat16 packed[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) packed[j] = __float2bfloat16(acc[c + j] * inverse);
      *reinterpret_cast<uint4*>(dst + c) = *reinterpret_cast<const uint4*>(packed);
    }
    lse[token * heads + h] = row_max + log2f(row_sum);  // base 2, the scale folded in
  }

  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "r"(TMEM_COLUMNS));
  }
}

void launch(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView qo_indptr,
            tvm::ffi::TensorView kv_indptr, const int* kv_indices, int64_t kv_heads, double sm_scale,
            tvm::ffi::TensorView output, tvm::ffi::TensorView lse) {
  const DLDataType bf16{kDLBfloat, 16, 1}, f32{kDLFloat, 32, 1}, i32{kDLInt, 32, 1};
  TVM_FFI_CHECK(q.dtype() == bf16 && k.dtype() == bf16 && v.dtype() == bf16 && output.dtype() == bf16, TypeError)
      << "q, the keys, the values and output must be bfloat16";
  TVM_FFI_CHECK(lse.dtype() == f32 && qo_indptr.dtype() == i32 && kv_indptr.dtype() == i32, TypeError)
      << "lse must be float32, the indptrs int32";
  const int64_t total_q = q.size(0), heads = q.size(1), requests = qo_indptr.size(0) - 1;
  TVM_FFI_CHECK(q.size(2) == D && k.size(k.ndim() - 1) == D && kv_heads > 0 && heads % kv_heads == 0, ValueError)
      << "head dim 128, query heads a multiple of KV heads";
  if (total_q == 0 || requests <= 0) return;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, q.device().device_id));
  static const bool ready = [] {
    return cudaFuncSetAttribute(gqa_prefill_tcgen05, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(SMEM_BYTES)) == cudaSuccess;
  }();
  TVM_FFI_CHECK(ready, RuntimeError) << "cannot raise the shared-memory limit";
  const KeyRows keys{static_cast<const __nv_bfloat16*>(k.data_ptr()), static_cast<const __nv_bfloat16*>(v.data_ptr()),
                     kv_indices, 0, static_cast<int>(kv_heads), 0};
  // Every request's last block may be partial: at most total_q / 128 + requests blocks.
  const dim3 grid(static_cast<unsigned>(total_q / BM + requests), static_cast<unsigned>(heads));
  const float scale_log2 = static_cast<float>(sm_scale) * 1.4426950408889634f;
  gqa_prefill_tcgen05<<<grid, BM, SMEM_BYTES, stream>>>(
      static_cast<const __nv_bfloat16*>(q.data_ptr()), keys, static_cast<const int*>(qo_indptr.data_ptr()),
      static_cast<const int*>(kv_indptr.data_ptr()), static_cast<int>(requests),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<float*>(lse.data_ptr()), static_cast<int>(heads),
      scale_log2);
  const cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

}  // namespace

#if GQA_PAGED
void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k_cache, tvm::ffi::TensorView v_cache,
         tvm::ffi::TensorView qo_indptr, tvm::ffi::TensorView kv_indptr, tvm::ffi::TensorView kv_indices, double sm_scale,
         tvm::ffi::TensorView output, tvm::ffi::TensorView lse) {
  TVM_FFI_CHECK(kv_indices.dtype() == (DLDataType{kDLInt, 32, 1}), TypeError) << "kv_indices must be int32";
  TVM_FFI_CHECK(k_cache.ndim() == 4 && v_cache.ndim() == 4 && k_cache.size(1) == 1, ValueError)
      << "k_cache and v_cache are [pages, 1, Hkv, 128] (page size 1)";
  launch(q, k_cache, v_cache, qo_indptr, kv_indptr, static_cast<const int*>(kv_indices.data_ptr()), k_cache.size(2),
         sm_scale, output, lse);
}
#else
void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView qo_indptr,
         tvm::ffi::TensorView kv_indptr, double sm_scale, tvm::ffi::TensorView output, tvm::ffi::TensorView lse) {
  TVM_FFI_CHECK(k.ndim() == 3 && v.ndim() == 3, ValueError) << "k and v are [total_kv, Hkv, 128]";
  launch(q, k, v, qo_indptr, kv_indptr, nullptr, k.size(1), sm_scale, output, lse);
}
#endif

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
