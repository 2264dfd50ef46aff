// Honest corpus: a gated delta-net decode step whose reductions are CUB's block- and warp-level
// primitives (cub::BlockReduce for the norms of q and k, cub::WarpReduce for each state row's two dot
// products), as code written against CUB does; the state arrives by one bulk copy, as in the reference.
// task: gdn_decode_qk4_v8_d128_k_last
#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int D = 128;
constexpr int THREADS = 128;
constexpr int STATE_BYTES = D * D * 4;
constexpr int SMEM_BYTES = STATE_BYTES + 2 * D * 4 + 4 * 4 + 16;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
using BlockSum = cub::BlockReduce<float, THREADS>;
using WarpSum = cub::WarpReduce<float>;

// Sum over the block's 128 threads, given to every thread (BlockReduce's total is thread 0's).
__device__ __forceinline__ float block_sum(float x, BlockSum::TempStorage& storage, float* total) {
  const float sum = BlockSum(storage).Sum(x);
  if (threadIdx.x == 0) *total = sum;
  __syncthreads();
  const float all = *total;
  __syncthreads();
  return all;
}
// Sum over one warp, given to every lane (WarpReduce's total is lane 0's).
__device__ __forceinline__ float warp_sum(float x, WarpSum::TempStorage& storage) {
  const float total = __shfl_sync(0xffffffffu, WarpSum(storage).Sum(x), 0);
  __syncwarp();  // the storage is used again for the row's next sum
  return total;
}

__global__ void __launch_bounds__(THREADS)
    gdn_decode_cub(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                    const __nv_bfloat16* __restrict__ v, const float* __restrict__ state,
                    const float* __restrict__ A_log, const __nv_bfloat16* __restrict__ a,
                    const __nv_bfloat16* __restrict__ dt_bias, const __nv_bfloat16* __restrict__ b_gate, float scale,
                    __nv_bfloat16* __restrict__ out, float* __restrict__ new_state, int heads, int v_heads) {
  extern __shared__ __align__(128) uint8_t smem[];
  float* S = reinterpret_cast<float*>(smem);  // [V][K]
  float* qn = S + D * D;
  float* kn = qn + D;
  float* scratch = kn + D;
  uint64_t* bar = reinterpret_cast<uint64_t*>(scratch + 4);
  __shared__ BlockSum::TempStorage block_storage;
  __shared__ WarpSum::TempStorage warp_storage[THREADS / 32];
  const int b = blockIdx.x, hv = blockIdx.y, h = hv / (v_heads / heads);
  const size_t slot = static_cast<size_t>(b) * v_heads + hv;
  const uint32_t bar_addr = smem_u32(bar);

  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(STATE_BYTES)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(S)),
                 "l"(state + slot * D * D), "r"(STATE_BYTES), "r"(bar_addr)
                 : "memory");
  }
  // While the state is in flight: q and k of head h normalised, the gates of head hv.
  const int t = threadIdx.x;
  const float qt = __bfloat162float(q[(static_cast<size_t>(b) * heads + h) * D + t]);
  const float kt = __bfloat162float(k[(static_cast<size_t>(b) * heads + h) * D + t]);
  const float q_norm = rsqrtf(block_sum(qt * qt, block_storage, scratch) + 1e-6f);
  const float k_norm = rsqrtf(block_sum(kt * kt, block_storage, scratch) + 1e-6f);
  qn[t] = qt * q_norm;
  kn[t] = kt * k_norm;
  const float x = __bfloat162float(a[slot]) + __bfloat162float(dt_bias[hv]);
  const float softplus = x > 20.f ? x : log1pf(expf(x));
  const float decay = expf(-expf(A_log[hv]) * softplus);
  const float beta = 1.f / (1.f + expf(-__bfloat162float(b_gate[slot])));
  __syncthreads();

  const int warp = t / 32, lane = t % 32;
  const float4 k4 = reinterpret_cast<const float4*>(kn)[lane];
  const float4 q4 = reinterpret_cast<const float4*>(qn)[lane];
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra WAIT_LOOP;\n}\n" ::"r"(bar_addr)
      : "memory");
  const __nv_bfloat16* v_row = v + slot * D;
  float4* dst = reinterpret_cast<float4*>(new_state + slot * D * D);
  for (int row = warp; row < D; row += THREADS / 32) {
    float4 s = reinterpret_cast<const float4*>(S + row * D)[lane];
    s.x *= decay, s.y *= decay, s.z *= decay, s.w *= decay;
    const float predicted = warp_sum(s.x * k4.x + s.y * k4.y + s.z * k4.z + s.w * k4.w, warp_storage[warp]);
    const float delta = beta * (__bfloat162float(v_row[row]) - predicted);
    s.x += delta * k4.x, s.y += delta * k4.y, s.z += delta * k4.z, s.w += delta * k4.w;
    const float o = warp_sum(s.x * q4.x + s.y * q4.y + s.z * q4.z + s.w * q4.w, warp_storage[warp]);
    dst[row * (D / 4) + lane] = s;
    if (lane == 0) out[slot * D + row] = __float2bfloat16(scale * o);
  }
}

}  // namespace

void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v, tvm::ffi::TensorView state,
         tvm::ffi::TensorView A_log, tvm::ffi::TensorView a, tvm::ffi::TensorView dt_bias, tvm::ffi::TensorView b,
         double scale, tvm::ffi::TensorView output, tvm::ffi::TensorView new_state) {
  const DLDataType bf16{kDLBfloat, 16, 1}, f32{kDLFloat, 32, 1};
  TVM_FFI_CHECK(q.dtype() == bf16 && k.dtype() == bf16 && v.dtype() == bf16 && a.dtype() == bf16 &&
                    b.dtype() == bf16 && dt_bias.dtype() == bf16 && output.dtype() == bf16,
                TypeError)
      << "q, k, v, a, b, dt_bias and output must be bfloat16";
  TVM_FFI_CHECK(state.dtype() == f32 && A_log.dtype() == f32 && new_state.dtype() == f32, TypeError)
      << "state, A_log and new_state must be float32";
  const int64_t batch = q.size(0), heads = q.size(2), v_heads = v.size(2);
  TVM_FFI_CHECK(q.size(1) == 1 && q.size(3) == D && v.size(3) == D, ValueError) << "one token, head size 128";
  TVM_FFI_CHECK(v_heads % heads == 0 && k.size(2) == heads, ValueError) << "value heads a multiple of q/k heads";
  if (batch == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, q.device().device_id));
  static const bool ready = [] {
    return cudaFuncSetAttribute(gdn_decode_cub, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) ==
           cudaSuccess;
  }();
  TVM_FFI_CHECK(ready, RuntimeError) << "cannot raise the shared-memory limit";
  gdn_decode_cub<<<dim3(static_cast<unsigned>(batch), static_cast<unsigned>(v_heads)), THREADS, SMEM_BYTES,
                    stream>>>(
      static_cast<const __nv_bfloat16*>(q.data_ptr()), static_cast<const __nv_bfloat16*>(k.data_ptr()),
      static_cast<const __nv_bfloat16*>(v.data_ptr()), static_cast<const float*>(state.data_ptr()),
      static_cast<const float*>(A_log.data_ptr()), static_cast<const __nv_bfloat16*>(a.data_ptr()),
      static_cast<const __nv_bfloat16*>(dt_bias.data_ptr()), static_cast<const __nv_bfloat16*>(b.data_ptr()),
      static_cast<float>(scale), static_cast<__nv_bfloat16*>(output.data_ptr()),
      static_cast<float*>(new_state.data_ptr()), static_cast<int>(heads), static_cast<int>(v_heads));
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
