// Honest corpus: a paged decode whose K and V rows arrive by libcu++'s cuda::memcpy_async on a
// cuda::barrier (16-byte aligned sizes: bulk copies, UBLKCP), one CTA per (request, query head), one stage,
// float sm_scale taken as double, error strings from cudaGetErrorName.
// task: gqa_paged_decode_h24_kv8_d128_ps1
#include <cuda/barrier>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int kDim = 128;
constexpr int kTokens = 32;  // tokens per chunk: one per lane of warp 0
constexpr int kWarps = 4;
using Barrier = cuda::barrier<cuda::thread_scope_block>;

__global__ void __launch_bounds__(kWarps * 32)
    decode_one_head(const __nv_bfloat16* q, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
                    const int* kv_indptr, const int* kv_indices, float scale, __nv_bfloat16* out, float* lse,
                    int heads, int kv_heads) {
  __shared__ alignas(128) __nv_bfloat16 keys[kTokens][kDim];
  __shared__ alignas(128) __nv_bfloat16 values[kTokens][kDim];
  __shared__ float merge_o[kWarps][kDim];
  __shared__ float merge_m[kWarps], merge_l[kWarps];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ Barrier barrier;

  const int request = blockIdx.x, head = blockIdx.y, kv_head = head / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first = kv_indptr[request], count = kv_indptr[request + 1] - first;
  if (threadIdx.x == 0) init(&barrier, blockDim.x);
  __syncthreads();

  float query[4];
  for (int i = 0; i < 4; ++i) {
    query[i] = __bfloat162float(q[(static_cast<size_t>(request) * heads + head) * kDim + lane * 4 + i]) * scale;
  }
  float running_max = -INFINITY, running_sum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};

  for (int start = 0; start < count; start += kTokens) {
    const int here = min(kTokens, count - start);
    if (warp == 0 && lane < here) {
      const size_t page = static_cast<size_t>(kv_indices[first + start + lane]);
      const size_t row = (page * kv_heads + kv_head) * kDim;
      cuda::memcpy_async(keys[lane], k_cache + row, cuda::aligned_size_t<16>(kDim * 2), barrier);
      cuda::memcpy_async(values[lane], v_cache + row, cuda::aligned_size_t<16>(kDim * 2), barrier);
    }
    barrier.arrive_and_wait();  // the chunk's copies have landed
    for (int t = warp; t < here; t += kWarps) {
      float score = 0.f;
      for (int i = 0; i < 4; ++i) score += query[i] * __bfloat162float(keys[t][lane * 4 + i]);
      for (int offset = 16; offset > 0; offset /= 2) score += __shfl_xor_sync(0xffffffffu, score, offset);
      const float new_max = fmaxf(running_max, score);
      const float correction = expf(running_max - new_max), weight = expf(score - new_max);
      running_sum = running_sum * correction + weight;
      for (int i = 0; i < 4; ++i) acc[i] = acc[i] * correction + weight * __bfloat162float(values[t][lane * 4 + i]);
      running_max = new_max;
    }
    __syncthreads();  // every warp is done with the chunk before the next one is copied over it
  }

  for (int i = 0; i < 4; ++i) merge_o[warp][lane * 4 + i] = acc[i];
  if (lane == 0) {
    merge_m[warp] = running_max;
    merge_l[warp] = running_sum;
  }
  __syncthreads();
  float top = -INFINITY;
  for (int w = 0; w < kWarps; ++w) top = fmaxf(top, merge_m[w]);
  float total = 0.f, value = 0.f;
  for (int w = 0; w < kWarps; ++w) {
    const float factor = merge_m[w] == -INFINITY ? 0.f : expf(merge_m[w] - top);
    total += merge_l[w] * factor;
    value += merge_o[w][threadIdx.x] * factor;
  }
  const size_t at = static_cast<size_t>(request) * heads + head;
  out[at * kDim + threadIdx.x] = __float2bfloat16(total > 0.f ? value / total : 0.f);
  // The scores were scaled in natural-log units: LSE in base 2 is (max + ln sum) / ln 2.
  if (threadIdx.x == 0) lse[at] = total > 0.f ? (top + logf(total)) * 1.4426950408889634f : -INFINITY;
}

}  // namespace

void decode(tvm::ffi::TensorView q, tvm::ffi::TensorView k_cache, tvm::ffi::TensorView v_cache,
            tvm::ffi::TensorView kv_indptr, tvm::ffi::TensorView kv_indices, double sm_scale,
            tvm::ffi::TensorView output, tvm::ffi::TensorView lse) {
  const int64_t batch = q.size(0), heads = q.size(1), kv_heads = k_cache.size(2);
  TVM_FFI_ICHECK(q.size(2) == kDim && heads % kv_heads == 0) << "head dim 128, whole query-head groups";
  if (batch == 0) return;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, q.device().device_id));
  decode_one_head<<<dim3(static_cast<unsigned>(batch), static_cast<unsigned>(heads)), kWarps * 32, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(q.data_ptr()), static_cast<const __nv_bfloat16*>(k_cache.data_ptr()),
      static_cast<const __nv_bfloat16*>(v_cache.data_ptr()), static_cast<const int*>(kv_indptr.data_ptr()),
      static_cast<const int*>(kv_indices.data_ptr()), static_cast<float>(sm_scale),
      static_cast<__nv_bfloat16*>(output.data_ptr()), static_cast<float*>(lse.data_ptr()), static_cast<int>(heads),
      static_cast<int>(kv_heads));
  const cudaError_t status = cudaGetLastError();
  TVM_FFI_ICHECK(status == cudaSuccess) << "decode launch: " << cudaGetErrorName(status);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, decode);
