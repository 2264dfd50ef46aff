// Paged GQA decode for gqa_paged_decode_h24_kv8_d128_ps1 (page size 1, head dim 128, bf16), Hopper sm_90a.
//
// One query token per request; query head h reads KV head h / G (G = num_qo_heads / num_kv_heads).
// output[b,h] = softmax(q K^T * sm_scale) V over request b's cached tokens, lse[b,h] in base 2.
//
// Decode is bound by memory: every cached K and V row is read once, for 4 FLOPs per element pair.
// The rows of a request sit on pages scattered through the cache, so there is no tile for a tensor
// map: each token's K row and V row (256 bytes each for one KV head) is fetched by its own bulk copy
// (cp.async.bulk, SASS UBLKCP) straight into shared memory, completing on the stage's mbarrier. No
// register or thread carries the bytes, and STAGES chunks of CHUNK tokens are in flight while the
// warps reduce the chunk before them.
//
// One CTA per (request, KV head): warp 0's lanes issue the copies, and every warp takes a quarter of
// each chunk's tokens with its own online-softmax state for the G query heads (each lane owns 4 of
// the 128 dims); the four warps' states are merged at the end.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int D = 128;
constexpr int MAX_G = 3;        // query heads per KV head the host dispatches (G is a template
                                // argument, so the per-head state stays in registers)
constexpr int CHUNK = 32;       // tokens per stage
constexpr int STAGES = 4;
constexpr int WARPS = 4;
constexpr int ROW_BYTES = D * 2;                   // one head's K (or V) row of one token
constexpr int STAGE_BYTES = CHUNK * 2 * ROW_BYTES;  // K rows then V rows: 16 KB
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGES * 8 + 128;
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
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
// Global -> shared bulk copy of `bytes` (multiple of 16, both ends 16-byte aligned), done on `bar`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

template <int G>
__global__ void __launch_bounds__(WARPS * 32)
    paged_decode_bulk(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
                      const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ kv_indptr,
                      const int* __restrict__ kv_indices, float scale_log2, __nv_bfloat16* __restrict__ out,
                      float* __restrict__ lse, int heads, int kv_heads) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int b = blockIdx.x, kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t stages = smem_u32(smem);
  const uint32_t bars = stages + STAGES * STAGE_BYTES;
  const int begin = kv_indptr[b], length = kv_indptr[b + 1] - begin;
  const int chunks = (length + CHUNK - 1) / CHUNK;
  const size_t row_stride = static_cast<size_t>(kv_heads) * D;  // elements between two pages' rows

  // Warp 0 fetches chunk c into stage c % STAGES: lane i copies token i's K row and V row.
  auto fetch = [&](int c) {
    const int s = c % STAGES;
    const int n = min(CHUNK, length - c * CHUNK);
    if (lane == 0) mbar_expect_tx(bars + 8 * s, n * 2 * ROW_BYTES);
    __syncwarp();
    if (lane < n) {
      const size_t row = static_cast<size_t>(kv_indices[begin + c * CHUNK + lane]) * row_stride + kvh * D;
      const uint32_t dst = stages + s * STAGE_BYTES + lane * ROW_BYTES;
      bulk_load(dst, k_cache + row, ROW_BYTES, bars + 8 * s);
      bulk_load(dst + CHUNK * ROW_BYTES, v_cache + row, ROW_BYTES, bars + 8 * s);
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) mbar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0)
    for (int c = 0; c < STAGES && c < chunks; ++c) fetch(c);

  // This lane's 4 dims of each query head, pre-scaled so that scores come out in log2 units.
  float qf[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const __nv_bfloat16* src = q + (static_cast<size_t>(b) * heads + kvh * G + g) * D + lane * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) qf[g][i] = __bfloat162float(src[i]) * scale_log2;
  }
  float m[G], l[G], o[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) o[g][i] = 0.f;
  }

  for (int c = 0; c < chunks; ++c) {
    const int s = c % STAGES;
    const int n = min(CHUNK, length - c * CHUNK);
    mbar_wait(bars + 8 * s, (c / STAGES) & 1);
    const uint8_t* stage = smem + s * STAGE_BYTES;
    for (int t = warp; t < n; t += WARPS) {
      const __nv_bfloat162* krow = reinterpret_cast<const __nv_bfloat162*>(stage + t * ROW_BYTES) + lane * 2;
      const __nv_bfloat162* vrow =
          reinterpret_cast<const __nv_bfloat162*>(stage + (CHUNK + t) * ROW_BYTES) + lane * 2;
      const float2 k01 = __bfloat1622float2(krow[0]), k23 = __bfloat1622float2(krow[1]);
      const float2 v01 = __bfloat1622float2(vrow[0]), v23 = __bfloat1622float2(vrow[1]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float score = qf[g][0] * k01.x + qf[g][1] * k01.y + qf[g][2] * k23.x + qf[g][3] * k23.y;
#pragma unroll
        for (int off = 16; off > 0; off /= 2) score += __shfl_xor_sync(0xffffffffu, score, off);
        const float m_new = fmaxf(m[g], score);
        const float keep = exp2f(m[g] - m_new), p = exp2f(score - m_new);
        l[g] = l[g] * keep + p;
        o[g][0] = o[g][0] * keep + p * v01.x;
        o[g][1] = o[g][1] * keep + p * v01.y;
        o[g][2] = o[g][2] * keep + p * v23.x;
        o[g][3] = o[g][3] * keep + p * v23.y;
        m[g] = m_new;
      }
    }
    __syncthreads();  // every warp is done with stage s: refill it
    if (warp == 0 && c + STAGES < chunks) fetch(c + STAGES);
  }

  // Merge the four warps' states through shared memory (the stages are free now).
  float* part_o = reinterpret_cast<float*>(smem);                 // [WARPS][MAX_G][D]
  float* part_ml = part_o + WARPS * MAX_G * D;                    // [WARPS][MAX_G][2]
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int i = 0; i < 4; ++i) part_o[(warp * MAX_G + g) * D + lane * 4 + i] = o[g][i];
    if (lane == 0) {
      part_ml[(warp * MAX_G + g) * 2] = m[g];
      part_ml[(warp * MAX_G + g) * 2 + 1] = l[g];
    }
  }
  __syncthreads();
  const int d = threadIdx.x;  // one output dim per thread (128 threads, D = 128)
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, part_ml[(w * MAX_G + g) * 2]);
    float sum = 0.f, acc = 0.f;
    for (int w = 0; w < WARPS; ++w) {
      const float wm = part_ml[(w * MAX_G + g) * 2];
      const float f = wm == -INFINITY ? 0.f : exp2f(wm - mx);
      sum += part_ml[(w * MAX_G + g) * 2 + 1] * f;
      acc += part_o[(w * MAX_G + g) * D + d] * f;
    }
    const size_t head = static_cast<size_t>(b) * heads + kvh * G + g;
    out[head * D + d] = __float2bfloat16(sum > 0.f ? acc / sum : 0.f);
    if (d == 0) lse[head] = sum > 0.f ? mx + log2f(sum) : -INFINITY;
  }
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k_cache, tvm::ffi::TensorView v_cache,
         tvm::ffi::TensorView kv_indptr, tvm::ffi::TensorView kv_indices, double sm_scale, tvm::ffi::TensorView output,
         tvm::ffi::TensorView lse) {
  const DLDataType bf16{kDLBfloat, 16, 1}, i32{kDLInt, 32, 1}, f32{kDLFloat, 32, 1};
  TVM_FFI_CHECK(q.dtype() == bf16 && k_cache.dtype() == bf16 && v_cache.dtype() == bf16 && output.dtype() == bf16,
                TypeError)
      << "q, k_cache, v_cache and output must be bfloat16";
  TVM_FFI_CHECK(kv_indptr.dtype() == i32 && kv_indices.dtype() == i32 && lse.dtype() == f32, TypeError)
      << "kv_indptr and kv_indices must be int32, lse float32";
  const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k_cache.size(2);
  TVM_FFI_CHECK(q.size(2) == D && k_cache.size(3) == D && k_cache.size(1) == 1, ValueError)
      << "head dim 128 and page size 1 only";
  const int64_t group = heads % kv_heads == 0 ? heads / kv_heads : 0;
  TVM_FFI_CHECK(group >= 1 && group <= MAX_G, ValueError) << "1 to 3 query heads per KV head";
  TVM_FFI_CHECK(kv_indptr.size(0) == batch + 1, ValueError) << "kv_indptr must hold batch_size + 1 offsets";
  if (batch == 0) return;
  const int device = q.device().device_id;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
  const float scale_log2 = static_cast<float>(sm_scale) * LOG2E;
  const dim3 grid(static_cast<unsigned>(batch), static_cast<unsigned>(kv_heads));
  const auto launch = [&](auto kernel) {
    TVM_FFI_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) == cudaSuccess,
                  RuntimeError)
        << "cannot raise the shared-memory limit";
    kernel<<<grid, WARPS * 32, SMEM_BYTES, stream>>>(
        static_cast<const __nv_bfloat16*>(q.data_ptr()), static_cast<const __nv_bfloat16*>(k_cache.data_ptr()),
        static_cast<const __nv_bfloat16*>(v_cache.data_ptr()), static_cast<const int*>(kv_indptr.data_ptr()),
        static_cast<const int*>(kv_indices.data_ptr()), scale_log2, static_cast<__nv_bfloat16*>(output.data_ptr()),
        static_cast<float*>(lse.data_ptr()), static_cast<int>(heads), static_cast<int>(kv_heads));
  };
  switch (heads / kv_heads) {
    case 1: launch(paged_decode_bulk<1>); break;
    case 2: launch(paged_decode_bulk<2>); break;
    default: launch(paged_decode_bulk<3>);  // the host check leaves no other group size
  }
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
