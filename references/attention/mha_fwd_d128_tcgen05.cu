// Attention forward on Blackwell sm_100a, head dim 128 (task mha_with_lse_d128 and, with the switch below on,
// mha_with_lse_d128_causal: key j is visible to query i iff j <= i).
// Built and static-checked only: no Blackwell GPU has run it (tests/test_blackwell_attention_references.py).
//
// O = softmax(Q K^T / sqrt(128)) V and LSE = logsumexp of the scaled scores (natural log), for
// Q, K, V, O [B, H, S, 128] bf16 and LSE [B, H, S] fp32. One CTA of 128 threads per 128 query rows of one
// (batch, head); thread t owns query row t, which is Tensor Memory lane t, so the softmax of a row is done
// by one thread with no shuffles:
//  * Q once, then per block of 64 keys: K as it is (K-major, D contiguous) and V transposed while copied
//    (so both products read K-major operands), staged in the no-swizzle core-matrix layout;
//  * S = Q K^T: 8 tcgen05.mma kind::f16 (M 128, N 64, K 16) into 64 TMEM columns, committed to an mbarrier;
//  * each thread loads its row of S (tcgen05.ld 32x32b), runs the online softmax in the exp2 domain and
//    writes its row of P as bf16 to shared memory;
//  * PV = P V: 4 tcgen05.mma (M 128, N 128, K 16) into 128 other TMEM columns; the thread folds its row
//    of PV into its O registers with the block's rescale (O stays in registers: 128 floats per thread).
// One thread issues every MMA; every wait is on the one mbarrier, its phase flipping per commit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#define ATTN_CAUSAL false  // this file is the plain variant

namespace {

constexpr int D = 128;        // head dim
constexpr int BM = 128;       // query rows per CTA (TMEM lanes)
constexpr int BN = 64;        // keys per block
constexpr int MMA_K = 16;     // K of one kind::f16 MMA
constexpr uint32_t TMEM_COLUMNS = 256;
constexpr uint32_t S_COLUMN = 0;     // S: BN columns
constexpr uint32_t PV_COLUMN = 128;  // PV: D columns
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

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

// rows x D bf16 rows of global memory (D contiguous) into a K-major tile, 16 bytes at a time.
template <int ROWS>
__device__ __forceinline__ void stage_rows(__nv_bfloat16* tile, const __nv_bfloat16* rows) {
  for (int i = threadIdx.x; i < ROWS * D / 8; i += blockDim.x) {
    const int row = i / (D / 8), col = (i % (D / 8)) * 8;
    *reinterpret_cast<uint4*>(tile + core_offset<ROWS>(row, col)) =
        *reinterpret_cast<const uint4*>(rows + static_cast<size_t>(row) * D + col);
  }
}

template <bool CAUSAL>
__global__ void __launch_bounds__(BM) attention_tcgen05(const __nv_bfloat16* __restrict__ q,
                                                        const __nv_bfloat16* __restrict__ k,
                                                        const __nv_bfloat16* __restrict__ v,
                                                        __nv_bfloat16* __restrict__ o, float* __restrict__ lse,
                                                        int seq, float scale_log2) {
  extern __shared__ __align__(128) uint8_t smem[];
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* sk = sq + Q_ELEMS;
  __nv_bfloat16* svt = sk + K_ELEMS;  // V transposed: D rows of BN keys
  __nv_bfloat16* sp = svt + VT_ELEMS;
  __shared__ alignas(8) uint64_t bar_storage;
  __shared__ uint32_t tmem_base;
  const int tid = threadIdx.x, warp = tid / 32;
  const size_t head = static_cast<size_t>(blockIdx.y) * seq * D;
  const int q0 = blockIdx.x * BM;
  const int row = q0 + tid;
  const uint32_t bar = smem_u32(&bar_storage);

  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(smem_u32(&tmem_base)),
                 "r"(TMEM_COLUMNS));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
  }
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar));
  stage_rows<BM>(sq, q + head + static_cast<size_t>(q0) * D);
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
  const int keys = CAUSAL ? q0 + BM : seq;  // a causal CTA's last key block ends at its last row

  for (int k0 = 0; k0 < keys; k0 += BN) {
    // The last block's MMAs were waited for and its TMEM reads are done: the tiles may be overwritten.
    asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
    __syncthreads();
    stage_rows<BN>(sk, k + head + static_cast<size_t>(k0) * D);
    for (int i = tid; i < BN * D; i += blockDim.x) {
      const int key = i / D, d = i % D;
      svt[core_offset<D>(d, key)] = v[head + static_cast<size_t>(k0 + key) * D + d];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> the MMA's reads
    __syncthreads();
    product<D / MMA_K, BM, BN>(tmem + S_COLUMN, sq, sk, bar, phase);  // S = Q K^T

    // The online softmax of this thread's row, in the exp2 domain with the scale folded in. Key 0 is
    // visible to every row, so the first block leaves every row's max finite.
    float scores[BN];
#pragma unroll
    for (int c = 0; c < BN; c += 16) load16(tmem + lane_base + S_COLUMN + c, scores + c);
    float block_max = row_max;
#pragma unroll
    for (int j = 0; j < BN; ++j) {
      scores[j] = (CAUSAL && k0 + j > row) ? -INFINITY : scores[j] * scale_log2;
      block_max = fmaxf(block_max, scores[j]);
    }
    const float rescale = exp2f(row_max - block_max);
    row_max = block_max;
    row_sum *= rescale;
#pragma unroll
    for (int c = 0; c < BN; c += 8) {
      __align__(16) __nv_bfloat16 packed[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const __nv_bfloat16 p = __float2bfloat16(exp2f(scores[c + j] - block_max));
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

  const float inverse = row_sum > 0.f ? 1.f / row_sum : 0.f;
  __nv_bfloat16* out = o + head + static_cast<size_t>(row) * D;
#pragma unroll
  for (int c = 0; c < D; c += 8) {
    __align__(16) __nv_bfloat16 packed[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) packed[j] = __float2bfloat16(acc[c + j] * inverse);
    *reinterpret_cast<uint4*>(out + c) = *reinterpret_cast<const uint4*>(packed);
  }
  lse[static_cast<size_t>(blockIdx.y) * seq + row] = (row_max + log2f(row_sum)) * LN2;

  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "r"(TMEM_COLUMNS));
  }
}

}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView O,
         tvm::ffi::TensorView LSE) {
  const DLDataType bf16{kDLBfloat, 16, 1}, f32{kDLFloat, 32, 1};
  TVM_FFI_CHECK(Q.dtype() == bf16 && K.dtype() == bf16 && V.dtype() == bf16 && O.dtype() == bf16, TypeError)
      << "Q, K, V and O must be bfloat16";
  TVM_FFI_CHECK(LSE.dtype() == f32, TypeError) << "LSE must be float32";
  TVM_FFI_CHECK(Q.ndim() == 4 && K.ndim() == 4 && V.ndim() == 4 && O.ndim() == 4 && LSE.ndim() == 3, ValueError)
      << "Q, K, V, O are [B, H, S, D] and LSE [B, H, S]";
  const int64_t batch = Q.size(0), heads = Q.size(1), seq = Q.size(2);
  TVM_FFI_CHECK(Q.size(3) == D, ValueError) << "head dim must be 128";
  TVM_FFI_CHECK(seq % BM == 0 && seq > 0, ValueError) << "S must be a positive multiple of 128";
  const int device = Q.device().device_id;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  TVM_FFI_CHECK(cudaFuncSetAttribute(attention_tcgen05<ATTN_CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(SMEM_BYTES)) == cudaSuccess,
                RuntimeError)
      << "cannot raise the shared-memory limit";
  const float scale_log2 = LOG2E / sqrtf(static_cast<float>(D));
  attention_tcgen05<ATTN_CAUSAL><<<dim3(static_cast<unsigned>(seq / BM), static_cast<unsigned>(batch * heads)), BM, SMEM_BYTES,
                      stream>>>(static_cast<const __nv_bfloat16*>(Q.data_ptr()),
                                static_cast<const __nv_bfloat16*>(K.data_ptr()),
                                static_cast<const __nv_bfloat16*>(V.data_ptr()),
                                static_cast<__nv_bfloat16*>(O.data_ptr()), static_cast<float*>(LSE.data_ptr()),
                                static_cast<int>(seq), scale_log2);
  const cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
