// Hostile: a decoy whose answer comes from integer multiply-adds in fixed point, which no counter credits
// to the task (nvcc issues IMAD for addresses and moves too). A and B are rounded to steps of 2^-14 in
// int tiles in shared memory, each product of the task one 64-bit IMAD.WIDE into an int64 sum, scaled
// back at the end (the rounding moves a 5120-long dot product of unit normals by ~0.002: within atol);
// beside it the full wgmma GEMM runs into a scratch buffer nobody reads. The tensor pipe shows all the
// task's FLOPs and no floating-point path any. Composed after wgmma_gemm.cu (as run_wgmma) and wgmma_for_show.cu.
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
  wgmma_for_show(A, B, C);
  launch_tiled(fixed_path::fixed_gemm, A, B, C);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
