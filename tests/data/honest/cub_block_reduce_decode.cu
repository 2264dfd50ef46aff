// Honest corpus: a gated delta-net decode step whose reductions are CUB's block- and warp-level
// primitives (cub::BlockReduce for the norms of q and k, cub::WarpReduce for each state row's two dot
// products), under CUB's umbrella header, as code written against CUB does; the state arrives by one bulk copy.
// task: gdn_decode_qk4_v8_d128_k_last
#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

constexpr int kDim = 128;     // head size (k and v)
constexpr int kThreads = 128;  // one thread per element of q and k; four warps share the state's rows
constexpr unsigned kStateBytes = kDim * kDim * sizeof(float);

using BlockSum = cub::BlockReduce<float, kThreads>;
using WarpSum = cub::WarpReduce<float>;

struct Shared {
  float state[kDim * kDim];  // [v][k], filled by the bulk copy
  float q[kDim];
  float k[kDim];
  float total;
  alignas(8) unsigned long long arrived;
  BlockSum::TempStorage block;
  WarpSum::TempStorage warp[kThreads / 32];
};

__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// One thread starts the copy of `bytes` from global memory into shared memory, completing on `barrier`.
__device__ inline void start_bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* barrier) {
  const unsigned bar = shared_address(barrier);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(dst)),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

__device__ inline void wait_phase_zero(unsigned long long* barrier) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier))
        : "memory");
  }
}

// The block's sum, for every thread (BlockReduce gives it to thread 0).
__device__ inline float everyone_sums(float x, Shared& sh) {
  const float sum = BlockSum(sh.block).Sum(x);
  if (threadIdx.x == 0) sh.total = sum;
  __syncthreads();
  const float all = sh.total;
  __syncthreads();  // the storage and the total are used again
  return all;
}

// The warp's sum, for every lane (WarpReduce gives it to lane 0).
__device__ inline float lanes_sum(float x, WarpSum::TempStorage& storage) {
  const float total = __shfl_sync(0xffffffffu, WarpSum(storage).Sum(x), 0);
  __syncwarp();
  return total;
}

__global__ void __launch_bounds__(kThreads) gdn_decode_cub(
    const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const float* state,
    const float* A_log, const __nv_bfloat16* a, const __nv_bfloat16* dt_bias, const __nv_bfloat16* b_gate,
    float scale, __nv_bfloat16* out, float* new_state, int heads, int v_heads) {
  extern __shared__ __align__(128) unsigned char raw[];
  Shared& sh = *reinterpret_cast<Shared*>(raw);
  const int seq = blockIdx.x, vh = blockIdx.y, qk_head = vh / (v_heads / heads);
  const size_t slot = static_cast<size_t>(seq) * v_heads + vh;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;

  if (t == 0) start_bulk_copy(sh.state, state + slot * kDim * kDim, kStateBytes, &sh.arrived);

  // Meanwhile: q and k of this head L2-normalised, and the head's gates.
  const size_t qk = (static_cast<size_t>(seq) * heads + qk_head) * kDim + t;
  const float qv = __bfloat162float(q[qk]), kv = __bfloat162float(k[qk]);
  sh.q[t] = qv * rsqrtf(everyone_sums(qv * qv, sh) + 1e-6f);
  sh.k[t] = kv * rsqrtf(everyone_sums(kv * kv, sh) + 1e-6f);
  const float x = __bfloat162float(a[slot]) + __bfloat162float(dt_bias[vh]);
  const float g = expf(-expf(A_log[vh]) * (x > 20.f ? x : log1pf(expf(x))));
  const float beta = 1.f / (1.f + expf(-__bfloat162float(b_gate[slot])));
  __syncthreads();
  wait_phase_zero(&sh.arrived);

  // A warp per row at a time; lane j holds columns j, j + 32, j + 64, j + 96 (conflict-free, coalesced).
  float* row_out = new_state + slot * kDim * kDim;
  for (int row = warp; row < kDim; row += kThreads / 32) {
    float s[4], kcol[4], qcol[4];
    float dot_k = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = lane + 32 * i;
      s[i] = g * sh.state[row * kDim + col];
      kcol[i] = sh.k[col];
      qcol[i] = sh.q[col];
      dot_k += s[i] * kcol[i];
    }
    const float delta = beta * (__bfloat162float(v[slot * kDim + row]) - lanes_sum(dot_k, sh.warp[warp]));
    float dot_q = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[i] += delta * kcol[i];
      dot_q += s[i] * qcol[i];
      row_out[row * kDim + lane + 32 * i] = s[i];
    }
    const float o = lanes_sum(dot_q, sh.warp[warp]);
    if (lane == 0) out[slot * kDim + row] = __float2bfloat16(scale * o);
  }
}

static void run(tvm::ffi::TensorView q, tvm::ffi::TensorView k, tvm::ffi::TensorView v,
                tvm::ffi::TensorView state, tvm::ffi::TensorView A_log, tvm::ffi::TensorView a,
                tvm::ffi::TensorView dt_bias, tvm::ffi::TensorView b, double scale, tvm::ffi::TensorView output,
                tvm::ffi::TensorView new_state) {
  TVM_FFI_ICHECK(q.ndim() == 4 && q.size(1) == 1 && q.size(3) == kDim) << "q is [B, 1, H, 128]";
  TVM_FFI_ICHECK(state.dtype().code == kDLFloat && state.dtype().bits == 32) << "the state is float32";
  const int batch = static_cast<int>(q.size(0));
  const int heads = static_cast<int>(q.size(2)), v_heads = static_cast<int>(v.size(2));
  TVM_FFI_ICHECK(heads > 0 && v_heads % heads == 0) << "value heads come in groups of the q/k heads";
  if (batch == 0) return;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, q.device().device_id));
  const int smem = static_cast<int>(sizeof(Shared));
  TVM_FFI_ICHECK(cudaFuncSetAttribute(gdn_decode_cub, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) ==
                 cudaSuccess)
      << "the kernel needs " << smem << " bytes of shared memory";
  gdn_decode_cub<<<dim3(batch, v_heads), kThreads, smem, stream>>>(
      static_cast<const __nv_bfloat16*>(q.data_ptr()), static_cast<const __nv_bfloat16*>(k.data_ptr()),
      static_cast<const __nv_bfloat16*>(v.data_ptr()), static_cast<const float*>(state.data_ptr()),
      static_cast<const float*>(A_log.data_ptr()), static_cast<const __nv_bfloat16*>(a.data_ptr()),
      static_cast<const __nv_bfloat16*>(dt_bias.data_ptr()), static_cast<const __nv_bfloat16*>(b.data_ptr()),
      static_cast<float>(scale), static_cast<__nv_bfloat16*>(output.data_ptr()),
      static_cast<float*>(new_state.data_ptr()), heads, v_heads);
  TVM_FFI_ICHECK(cudaGetLastError() == cudaSuccess) << "the launch failed";
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
