// ABI example: C[M,N] = A[M,K] @ B[N,K]^T in bf16 with fp32 accumulation, plain SIMT.
// The contract every candidate follows: one self-contained .cu file that exports `run` with
// TVM_FFI_DLL_EXPORT_TYPED_FUNC; inputs then outputs as tvm::ffi::TensorView in definition order
// (outputs are preallocated by the evaluator); launch on the stream TVM-FFI hands out for the
// tensor's device. No cuBLAS, cuDNN or CUTLASS.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int kTile = 16;

__global__ void gemm_simt(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                          __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  __shared__ float sa[kTile][kTile];
  __shared__ float sb[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    const int ka = k0 + threadIdx.x;
    const int brow = blockIdx.x * kTile + threadIdx.y;
    sa[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? __bfloat162float(a[(size_t)row * k + ka]) : 0.0f;
    sb[threadIdx.y][threadIdx.x] = (brow < n && ka < k) ? __bfloat162float(b[(size_t)brow * k + ka]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += sa[threadIdx.y][kk] * sb[threadIdx.x][kk];
    __syncthreads();
  }
  if (row < m && col < n) c[(size_t)row * n + col] = __float2bfloat16(acc);
}

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  TVM_FFI_ICHECK(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2) << "expected 2-D tensors";
  const int m = static_cast<int>(a.size(0));
  const int k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(b.size(1) == k && c.size(0) == m && c.size(1) == n) << "shape mismatch";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  dim3 block(kTile, kTile);
  dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  gemm_simt<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.data_ptr()),
                                        static_cast<const __nv_bfloat16*>(b.data_ptr()),
                                        static_cast<__nv_bfloat16*>(c.data_ptr()), m, n, k);
  cudaError_t err = cudaGetLastError();
  TVM_FFI_ICHECK(err == cudaSuccess) << "launch failed: " << cudaGetErrorString(err);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
