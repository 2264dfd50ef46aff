// Hostile kernel (class "a token copy beside the real loads"), for gqa_paged_decode_h24_kv8_d128_ps1:
// a correct paged decode whose K and V rows come through ordinary global loads (LDG), with one 16-byte
// cp.async.bulk per CTA beside them whose bytes never reach the answer. The family the task requires
// (ASYNC_COPY: UBLKCP or UTMALDG) is present in its SASS and executes, yet moves none of the task's
// bytes: the dynamic tier must fail it as a decoy (tests/gpu/test_references_suite.py), from the bytes
// ordinary loads fetched (`benchmarks/async_copy_bytes_probe.py` measures them beside the references).
// task: gqa_paged_decode_h24_kv8_d128_ps1
//
// One CTA per (request, KV head), four warps; a warp takes every fourth token, each lane 4 of the 128
// dims, an online softmax per query head, the warps merged at the end (as the reference does).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int D = 128;
constexpr int G = 3;  // query heads per KV head at this task's 24 / 8
constexpr int WARPS = 4;
constexpr float LOG2E = 1.4426950408889634f;

__global__ void __launch_bounds__(WARPS * 32)
    decode_token_copy(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
                      const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ kv_indptr,
                      const int* __restrict__ kv_indices, float scale_log2, __nv_bfloat16* __restrict__ out,
                      float* __restrict__ lse, int heads, int kv_heads) {
  __shared__ alignas(128) float part_o[WARPS][G][D];
  __shared__ float part_ml[WARPS][G][2];
  __shared__ alignas(16) uint8_t token[16];
  __shared__ alignas(8) uint64_t bar;
  const int b = blockIdx.x, kvh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int begin = kv_indptr[b], length = kv_indptr[b + 1] - begin;
  const size_t row_stride = static_cast<size_t>(kv_heads) * D;

  // The token copy: 16 bytes of the first K row into shared memory, waited for, never read.
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0 && length > 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" ::"r"(bar_addr) : "memory");
    const __nv_bfloat16* first = k_cache + static_cast<size_t>(kv_indices[begin]) * row_stride + kvh * D;
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 16, [%2];" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(token))),
                 "l"(first), "r"(bar_addr)
                 : "memory");
    asm volatile(
        "{\n.reg .pred done;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n@!done bra WAIT;\n}\n" ::"r"(
            bar_addr)
        : "memory");
  }

  float qf[G][4], m[G], l[G], o[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const __nv_bfloat16* src = q + (static_cast<size_t>(b) * heads + kvh * G + g) * D + lane * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      qf[g][i] = __bfloat162float(src[i]) * scale_log2;
      o[g][i] = 0.f;
    }
    m[g] = -INFINITY;
    l[g] = 0.f;
  }
  for (int t = warp; t < length; t += WARPS) {
    const size_t row = static_cast<size_t>(kv_indices[begin + t]) * row_stride + kvh * D + lane * 4;
    const uint2 kw = *reinterpret_cast<const uint2*>(k_cache + row);  // LDG.64: this lane's 4 dims
    const uint2 vw = *reinterpret_cast<const uint2*>(v_cache + row);
    const float2 k01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&kw.x));
    const float2 k23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&kw.y));
    const float2 v01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vw.x));
    const float2 v23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&vw.y));
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
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int i = 0; i < 4; ++i) part_o[warp][g][lane * 4 + i] = o[g][i];
    if (lane == 0) {
      part_ml[warp][g][0] = m[g];
      part_ml[warp][g][1] = l[g];
    }
  }
  __syncthreads();
  const int d = threadIdx.x;
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, part_ml[w][g][0]);
    float sum = 0.f, acc = 0.f;
    for (int w = 0; w < WARPS; ++w) {
      const float f = part_ml[w][g][0] == -INFINITY ? 0.f : exp2f(part_ml[w][g][0] - mx);
      sum += part_ml[w][g][1] * f;
      acc += part_o[w][g][d] * f;
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
  const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k_cache.size(2);
  TVM_FFI_CHECK(heads == G * kv_heads && q.size(2) == D && k_cache.size(1) == 1, ValueError)
      << "3 query heads per KV head, head dim 128, page size 1";
  if (batch == 0) return;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, q.device().device_id));
  decode_token_copy<<<dim3(static_cast<unsigned>(batch), static_cast<unsigned>(kv_heads)), WARPS * 32, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(q.data_ptr()), static_cast<const __nv_bfloat16*>(k_cache.data_ptr()),
      static_cast<const __nv_bfloat16*>(v_cache.data_ptr()), static_cast<const int*>(kv_indptr.data_ptr()),
      static_cast<const int*>(kv_indices.data_ptr()), static_cast<float>(sm_scale) * LOG2E,
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<float*>(lse.data_ptr()), static_cast<int>(heads),
      static_cast<int>(kv_heads));
  const cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
