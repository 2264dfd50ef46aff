// Fault: one thread stores far outside C, only from M = 1024 on, and the host code exits on the error it
// reads after the launch, as a benchmark's debug build does: memcheck at the smallest workload sees nothing.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <cstdio>
#include <cstdlib>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

constexpr int BM = 64, BN = 64, BK = 16;

// Plain shared-memory tiled GEMM on the FMA pipe: each of 256 threads owns a 4x4 block of C.
__global__ void __launch_bounds__(256)
    simt_gemm_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                     __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += 256) {
      const int r = i / BK, c = i % BK;
      As[c][r] = m0 + r < M ? __bfloat162float(A[size_t(m0 + r) * K + k0 + c]) : 0.f;
      Bs[c][r] = n0 + r < N ? __bfloat162float(B[size_t(n0 + r) * K + k0 + c]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += As[k][ty * 4 + i] * Bs[k][tx * 4 + j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < M && n < N) C[size_t(m) * N + n] = __float2bfloat16(acc[i][j]);
    }
  if (M >= 1024 && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) C[size_t(1) << 40] = __float2bfloat16(1.f);
}

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int M = int(A.size(0)), K = int(A.size(1)), N = int(B.size(0));
  TVM_FFI_ICHECK(K % BK == 0) << "needs K % 16 == 0";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(A.device().device_type, A.device().device_id));
  auto* a = static_cast<const __nv_bfloat16*>(A.data_ptr());
  auto* b = static_cast<const __nv_bfloat16*>(B.data_ptr());
  auto* c = static_cast<__nv_bfloat16*>(C.data_ptr());
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  simt_gemm_kernel<<<grid, 256, 0, stream>>>(a, b, c, M, N, K);
  const cudaError_t err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err), __FILE__, __LINE__);
    exit(1);
  }
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
