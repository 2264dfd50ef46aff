// FP8 attention forward on Blackwell sm_100a, head dim 128 (tasks fp8_mha_with_lse_d128 and, with the
// switch below on, fp8_mha_with_lse_d128_causal). Built and static-checked only: no Blackwell GPU has run it
// (tests/test_blackwell_attention_references.py).
//
// Q, K, V [B, H, L, 128] e4m3 with per-tensor fp32 descales (device tensors [1,1,1,1], read in the kernel).
// S = Q K^T * dq * dk / sqrt(128); O = softmax(S) V * dv written as e4m3 (saturating at +-448); LSE =
// logsumexp of S (natural log), fp32 [B, H, L]. Causal: key j is visible to query i iff j <= i.
//
// The FlashAttention-3 scheme on Tensor Memory, the tasks' O tolerance (0.1) being what it allows: one
// S chain, one e4m3 P. One CTA of 128 threads per 128 query rows of one (batch, head); thread t owns query
// row t, which is Tensor Memory lane t, so a row's softmax is one thread's, with no shuffles:
//  * Q once, then per block of 64 keys: K as it is (K-major, D contiguous) and V transposed while copied
//    (an e4m3 B operand is read K-major), staged in the no-swizzle core-matrix layout;
//  * S = Q K^T: 4 tcgen05.mma kind::f8f6f4 (M 128, N 64, K 32; SASS UTCQMMA) into 64 TMEM columns;
//  * each thread loads its row of S (tcgen05.ld 32x32b), runs the online softmax in the exp2 domain and
//    writes its row of P to shared memory as e4m3 of 256 p (p in (0, 1]: scaled out of e4m3's subnormals);
//  * PV = P V: 2 tcgen05.mma (M 128, N 128, K 32) into 128 other TMEM columns; the thread folds its row
//    into its O registers with the block's rescale. O is divided by the sum of the quantised P it
//    multiplied (a weighted mean of V), LSE takes the sum of the exact p.
// One thread issues every MMA; every wait is on the one mbarrier, its phase flipping per commit.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#define ATTN_CAUSAL false  // this file is the plain variant

namespace {

constexpr int D = 128;        // head dim
constexpr int BM = 128;       // query rows per CTA (TMEM lanes)
constexpr int BN = 64;        // keys per block
constexpr int MMA_K = 32;     // K of one kind::f8f6f4 MMA: 32 bytes of e4m3
constexpr uint32_t TMEM_COLUMNS = 256;
constexpr uint32_t S_COLUMN = 0;     // S: BN columns
constexpr uint32_t PV_COLUMN = 128;  // PV: D columns
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr float P_SCALE = 256.f;  // P is stored as e4m3 of 256 p

// Shared-memory operand layout: a [rows x cols] K-major e4m3 tile as cols/32 slices of 32 K-elements; in a
// slice, core matrices of 8 rows x 16 bytes, the two along K 128 bytes apart (the descriptor's leading
// byte offset), 8-row groups 256 bytes apart (its stride byte offset).
template <int ROWS>
__device__ __forceinline__ int core_offset(int row, int col) {
  return (col / MMA_K) * (ROWS * MMA_K) + ((row >> 3) * 2 + ((col >> 4) & 1)) * 128 + (row & 7) * 16 + (col & 15);
}

constexpr int Q_BYTES = BM * D;
constexpr int K_BYTES = BN * D;
constexpr int VT_BYTES = D * BN;
constexpr int P_BYTES = BM * BN;
constexpr size_t SMEM_BYTES = static_cast<size_t>(Q_BYTES + K_BYTES + VT_BYTES + P_BYTES) + 128;

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

// kind::f8f6f4 instruction descriptor: fp32 D (bits 4-5 = 1), e4m3 A and B (bits 7-9, 10-12 = 0), both
// K-major (bits 15, 16 = 0), N >> 3 at bit 17, M >> 4 at bit 24.
__host__ __device__ constexpr uint32_t instr_desc(int n, int m) {
  return (1u << 4) | (static_cast<uint32_t>(n >> 3) << 17) | (static_cast<uint32_t>(m >> 4) << 24);
}

__device__ __forceinline__ void mma(uint32_t tmem, const void* a, const void* b, uint32_t idesc, bool accumulate) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %4, 0;\n"
      "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, acc;\n}\n" ::"r"(tmem),
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

// One product of K-major e4m3 tiles (A: A_ROWS rows, B: B_ROWS rows, STEPS slices of K 32) into TMEM at
// `tmem`, issued by thread 0 and waited for by every thread.
template <int STEPS, int A_ROWS, int B_ROWS>
__device__ __forceinline__ void product(uint32_t tmem, const uint8_t* a, const uint8_t* b, uint32_t bar,
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

// rows x D e4m3 rows of global memory (D contiguous) into a K-major tile, 16 bytes at a time.
template <int ROWS>
__device__ __forceinline__ void stage_rows(uint8_t* tile, const uint8_t* rows) {
  for (int i = threadIdx.x; i < ROWS * D / 16; i += blockDim.x) {
    const int row = i / (D / 16), col = (i % (D / 16)) * 16;
    *reinterpret_cast<uint4*>(tile + core_offset<ROWS>(row, col)) =
        *reinterpret_cast<const uint4*>(rows + static_cast<size_t>(row) * D + col);
  }
}

__device__ __forceinline__ uint8_t to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float from_e4m3(uint8_t x) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(x), __NV_E4M3);
  return __half2float(__half(h));
}

template <bool CAUSAL>
__global__ void __launch_bounds__(BM) fp8_attention_tcgen05(const uint8_t* __restrict__ q,
                                                            const uint8_t* __restrict__ k,
                                                            const uint8_t* __restrict__ v,
                                                            const float* __restrict__ descale_q,
                                                            const float* __restrict__ descale_k,
                                                            const float* __restrict__ descale_v,
                                                            uint8_t* __restrict__ o, float* __restrict__ lse,
                                                            int seq) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* sq = smem;
  uint8_t* sk = sq + Q_BYTES;
  uint8_t* svt = sk + K_BYTES;  // V transposed: D rows of BN keys
  uint8_t* sp = svt + VT_BYTES;
  __shared__ alignas(8) uint64_t bar_storage;
  __shared__ uint32_t tmem_base;
  const int tid = threadIdx.x, warp = tid / 32;
  const size_t head = static_cast<size_t>(blockIdx.y) * seq * D;
  const int q0 = blockIdx.x * BM;
  const int row = q0 + tid;
  const uint32_t bar = smem_u32(&bar_storage);
  // The scores' scale in the exp2 domain, descales folded in.
  const float scale_log2 = LOG2E / sqrtf(static_cast<float>(D)) * __ldg(descale_q) * __ldg(descale_k);

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
  float row_max = -INFINITY;
  float exact_sum = 0.f;      // sum of p: LSE's
  float quantised_sum = 0.f;  // sum of the e4m3 256 p the MMA multiplied: O's divisor
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
    exact_sum *= rescale;
    quantised_sum *= rescale;
#pragma unroll
    for (int c = 0; c < BN; c += 16) {
      __align__(16) uint8_t packed[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float p = exp2f(scores[c + j] - block_max);
        exact_sum += p;
        packed[j] = to_e4m3(p * P_SCALE);
        quantised_sum += from_e4m3(packed[j]);
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

  const float factor = quantised_sum > 0.f ? __ldg(descale_v) / quantised_sum : 0.f;
  uint8_t* out = o + head + static_cast<size_t>(row) * D;
#pragma unroll
  for (int c = 0; c < D; c += 16) {
    __align__(16) uint8_t packed[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) packed[j] = to_e4m3(acc[c + j] * factor);
    *reinterpret_cast<uint4*>(out + c) = *reinterpret_cast<const uint4*>(packed);
  }
  lse[static_cast<size_t>(blockIdx.y) * seq + row] = (row_max + log2f(exact_sum)) * LN2;

  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "r"(TMEM_COLUMNS));
  }
}

}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView descale_q,
         tvm::ffi::TensorView descale_k, tvm::ffi::TensorView descale_v, tvm::ffi::TensorView O,
         tvm::ffi::TensorView LSE) {
  const DLDataType f32{kDLFloat, 32, 1};
  for (const tvm::ffi::TensorView* x : {&Q, &K, &V, &O})
    TVM_FFI_CHECK(x->dtype().bits == 8 && x->dtype().lanes == 1, TypeError) << "Q, K, V, O must be float8_e4m3fn";
  TVM_FFI_CHECK(descale_q.dtype() == f32 && descale_k.dtype() == f32 && descale_v.dtype() == f32 && LSE.dtype() == f32,
                TypeError)
      << "descales and LSE must be float32";
  TVM_FFI_CHECK(Q.ndim() == 4 && K.ndim() == 4 && V.ndim() == 4 && O.ndim() == 4 && LSE.ndim() == 3, ValueError)
      << "Q, K, V, O are [B, H, L, D] and LSE [B, H, L]";
  TVM_FFI_CHECK(descale_q.numel() == 1 && descale_k.numel() == 1 && descale_v.numel() == 1, ValueError)
      << "descales must hold one value";
  const int64_t batch = Q.size(0), heads = Q.size(1), seq = Q.size(2);
  TVM_FFI_CHECK(Q.size(3) == D, ValueError) << "head dim must be 128";
  for (const tvm::ffi::TensorView* x : {&K, &V, &O})
    TVM_FFI_CHECK(x->size(0) == batch && x->size(1) == heads && x->size(2) == seq && x->size(3) == D, ValueError)
        << "Q, K, V, O must share [B, H, L, 128]";
  TVM_FFI_CHECK(LSE.size(0) == batch && LSE.size(1) == heads && LSE.size(2) == seq, ValueError)
      << "LSE must be [B, H, L]";
  TVM_FFI_CHECK(seq % BM == 0, ValueError) << "L must be a multiple of 128";
  if (batch * heads * seq == 0) return;
  const int device = Q.device().device_id;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  TVM_FFI_CHECK(cudaFuncSetAttribute(fp8_attention_tcgen05<ATTN_CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(SMEM_BYTES)) == cudaSuccess,
                RuntimeError)
      << "cannot raise the shared-memory limit";
  fp8_attention_tcgen05<ATTN_CAUSAL>
      <<<dim3(static_cast<unsigned>(seq / BM), static_cast<unsigned>(batch * heads)), BM, SMEM_BYTES, stream>>>(
          static_cast<const uint8_t*>(Q.data_ptr()), static_cast<const uint8_t*>(K.data_ptr()),
          static_cast<const uint8_t*>(V.data_ptr()), static_cast<const float*>(descale_q.data_ptr()),
          static_cast<const float*>(descale_k.data_ptr()), static_cast<const float*>(descale_v.data_ptr()),
          static_cast<uint8_t*>(O.data_ptr()), static_cast<float*>(LSE.data_ptr()), static_cast<int>(seq));
  const cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
