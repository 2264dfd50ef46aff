// Hostile: a decoy whose answer comes from integer multiply-adds in fixed point, which no counter credits
// to the task (nvcc issues IMAD for addresses and moves too). A and B are rounded to steps of 2^-14 in
// int tiles in shared memory, each product of the task one 64-bit IMAD.WIDE into an int64 sum, scaled
// back at the end (the rounding moves a 5120-long dot product of unit normals by ~0.002: within atol);
// beside it the full wgmma GEMM runs into a scratch buffer nobody reads. The tensor pipe shows all the
// task's FLOPs and no floating-point path any. Composed after wgmma_gemm.cu (as run_wgmma).
namespace fixed_path {
constexpr int kTile = 32;
constexpr float kScale = 16384.f;

__device__ __forceinline__ int fixed(__nv_bfloat16 x) { return __float2int_rn(__bfloat162float(x) * kScale); }

__global__ void __launch_bounds__(kTile * kTile)
    fixed_gemm(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
               __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ int a_tile[kTile][kTile + 1];
  __shared__ int b_tile[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  const int b_row = blockIdx.x * kTile + threadIdx.y;
  long long sum = 0;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    a_tile[threadIdx.y][threadIdx.x] = row < M ? fixed(A[size_t(row) * K + k0 + threadIdx.x]) : 0;
    b_tile[threadIdx.y][threadIdx.x] = b_row < N ? fixed(B[size_t(b_row) * K + k0 + threadIdx.x]) : 0;
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTile; ++k) sum += (long long)a_tile[threadIdx.y][k] * b_tile[threadIdx.x][k];
    __syncthreads();
  }
  if (row < M && col < N) C[size_t(row) * N + col] = __float2bfloat16(float(double(sum) / (double(kScale) * kScale)));
}
}  // namespace fixed_path

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static void* scratch = nullptr;
  const int M = int(A.size(0)), K = int(A.size(1)), N = int(B.size(0));
  TVM_FFI_ICHECK(K % fixed_path::kTile == 0) << "needs K % 32 == 0";
  const size_t bytes = size_t(C.size(0)) * C.size(1) * 2;
  if (!scratch) cudaMalloc(&scratch, bytes);
  int64_t shape[2] = {C.size(0), C.size(1)};
  DLTensor view{scratch, C.device(), 2, C.dtype(), shape, nullptr, 0};
  run_wgmma(A, B, tvm::ffi::TensorView(&view));
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  const dim3 grid((N + fixed_path::kTile - 1) / fixed_path::kTile, (M + fixed_path::kTile - 1) / fixed_path::kTile);
  fixed_path::fixed_gemm<<<grid, dim3(fixed_path::kTile, fixed_path::kTile), 0, stream>>>(
      static_cast<const __nv_bfloat16*>(A.data_ptr()), static_cast<const __nv_bfloat16*>(B.data_ptr()),
      static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
