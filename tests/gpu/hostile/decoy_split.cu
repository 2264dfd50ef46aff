// Hostile: a decoy whose answer comes from no fused multiply-add. Each multiply-add of the task is a
// __fmul_rn then a __fadd_rn (FMUL, FADD: the compiler never fuses these), in a shared-memory tiled SIMT
// GEMM; beside it the full wgmma GEMM runs into a scratch buffer nobody reads. Counting FFMA alone, the
// profile shows GMMA doing all the task's FLOPs and nothing else doing them. Composed after wgmma_gemm.cu
// (as run_wgmma) and wgmma_for_show.cu.
namespace split_path {
constexpr int kTile = 32;

__global__ void __launch_bounds__(kTile * kTile)
    split_gemm(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
               __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ float a_tile[kTile][kTile + 1];
  __shared__ float b_tile[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  const int b_row = blockIdx.x * kTile + threadIdx.y;
  float sum = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    a_tile[threadIdx.y][threadIdx.x] = row < M ? __bfloat162float(A[size_t(row) * K + k0 + threadIdx.x]) : 0.f;
    b_tile[threadIdx.y][threadIdx.x] = b_row < N ? __bfloat162float(B[size_t(b_row) * K + k0 + threadIdx.x]) : 0.f;
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTile; ++k) sum = __fadd_rn(sum, __fmul_rn(a_tile[threadIdx.y][k], b_tile[threadIdx.x][k]));
    __syncthreads();
  }
  if (row < M && col < N) C[size_t(row) * N + col] = __float2bfloat16(sum);
}
}  // namespace split_path

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  wgmma_for_show(A, B, C);
  launch_tiled(split_path::split_gemm, A, B, C);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
