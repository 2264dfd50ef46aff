// GEMM ladder, step 1: tiled SIMT kernel (CUDA cores only, fp32 FMA).
//
// C[M,N] = A[M,K] @ B[N,K]^T, bf16 in/out, fp32 accumulate (task family gemm_n*_k*).
//
// The classic shared-memory tiling: a CTA of 256 threads owns a 128x128 tile of C; each k-step of 16
// it stages a 128x16 slice of A and of B in shared memory (converted to fp32 and transposed so
// that the inner loop reads 4 consecutive floats at a time), and every thread accumulates an 8x8
// block of C in registers (two 4x4 quadrants 64 apart, so the warp's shared reads are
// conflict-free). The next slice is read from global memory into registers while the current one
// is multiplied. Its ceiling is the fp32 FMA rate (about 67 TFLOP/s on an H100/H200), a twelfth of
// the bf16 tensor-core rate: step 2 moves the arithmetic onto the tensor cores.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int BM = 128, BN = 128, BK = 16;
constexpr int THREADS = 256;
constexpr int PAD = 4;  // keeps the transposed stores from piling onto one bank

__global__ void __launch_bounds__(THREADS) gemm_simt(const __nv_bfloat16* __restrict__ A,
                                                     const __nv_bfloat16* __restrict__ B,
                                                     __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[BK][BM + PAD];
  __shared__ __align__(16) float Bs[BK][BN + PAD];

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  // Loader mapping: thread reads 8 consecutive k of one row of A and of B (one 16-byte load each).
  const int lrow = threadIdx.x / 2, lk = (threadIdx.x % 2) * 8;
  const bool a_ok = m0 + lrow < M, b_ok = n0 + lrow < N;
  const __nv_bfloat16* a_src = A + static_cast<size_t>(a_ok ? m0 + lrow : 0) * K + lk;
  const __nv_bfloat16* b_src = B + static_cast<size_t>(b_ok ? n0 + lrow : 0) * K + lk;

  float acc[8][8] = {};
  uint4 a_reg = a_ok ? *reinterpret_cast<const uint4*>(a_src) : make_uint4(0, 0, 0, 0);
  uint4 b_reg = b_ok ? *reinterpret_cast<const uint4*>(b_src) : make_uint4(0, 0, 0, 0);

  for (int k0 = 0; k0 < K; k0 += BK) {
    const __nv_bfloat16* av = reinterpret_cast<const __nv_bfloat16*>(&a_reg);
    const __nv_bfloat16* bv = reinterpret_cast<const __nv_bfloat16*>(&b_reg);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      As[lk + i][lrow] = __bfloat162float(av[i]);
      Bs[lk + i][lrow] = __bfloat162float(bv[i]);
    }
    __syncthreads();
    if (k0 + BK < K) {  // prefetch the next slice while this one is multiplied
      a_reg = a_ok ? *reinterpret_cast<const uint4*>(a_src + k0 + BK) : make_uint4(0, 0, 0, 0);
      b_reg = b_ok ? *reinterpret_cast<const uint4*>(b_src + k0 + BK) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[8], b[8];
      *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
      *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(&As[kk][64 + ty * 4]);
      *reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
      *reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(&Bs[kk][64 + tx * 4]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (row >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = n0 + h * 64 + tx * 4;
      __nv_bfloat16* dst = C + static_cast<size_t>(row) * N + col;
      if (col + 3 < N) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(acc[i][h * 4], acc[i][h * 4 + 1]);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&lo);
        packed.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(dst) = packed;
      }
    }
  }
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const DLDataType bf16{kDLBfloat, 16, 1};
  TVM_FFI_CHECK(A.dtype() == bf16 && B.dtype() == bf16 && C.dtype() == bf16, TypeError) << "A, B, C must be bfloat16";
  TVM_FFI_CHECK(A.ndim() == 2 && B.ndim() == 2 && C.ndim() == 2, ValueError) << "A, B, C must be 2-D";
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  TVM_FFI_CHECK(B.size(1) == K && C.size(0) == M && C.size(1) == N, ValueError) << "shape mismatch";
  TVM_FFI_CHECK(K % BK == 0 && N % 4 == 0, ValueError) << "K must be a multiple of 16 and N of 4";
  if (M == 0 || N == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, A.device().device_id));
  const dim3 grid(static_cast<unsigned>((N + BN - 1) / BN), static_cast<unsigned>((M + BM - 1) / BM));
  gemm_simt<<<grid, THREADS, 0, stream>>>(static_cast<const __nv_bfloat16*>(A.data_ptr()),
                                          static_cast<const __nv_bfloat16*>(B.data_ptr()),
                                          static_cast<__nv_bfloat16*>(C.data_ptr()), static_cast<int>(M),
                                          static_cast<int>(N), static_cast<int>(K));
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
