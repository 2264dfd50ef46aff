// Static-evaluation test kernel (Hopper, sm_90a): one warpgroup per 64x64 tile of
// C[M,N] = A[M,K] @ B[N,K]^T with wgmma.mma_async m64n64k16 (bf16 in, fp32 accumulate).
// Operands are staged in shared memory in the no-swizzle core-matrix layout (8 rows x 16 bytes).
// Written to exercise the build and SASS checks (HGMMA); shapes must be multiples of 64 (M, N) and 16 (K).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 16;

// Offset (in elements) of element (row, k) inside a [rows x 16] K-major tile laid out as core
// matrices: core (row/8, k/8) at (row/8 * 2 + k/8) * 64 elements, row-major 8x8 inside.
__device__ __forceinline__ int core_offset(int row, int k) {
  return ((row >> 3) * 2 + (k >> 3)) * 64 + (row & 7) * 8 + (k & 7);
}

__device__ __forceinline__ uint64_t smem_descriptor(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(128 >> 4) << 16;  // leading byte offset: next core matrix along K
  desc |= static_cast<uint64_t>(256 >> 4) << 32;  // stride byte offset: next 8-row group
  return desc;  // swizzle mode 0 (none), base offset 0
}

__global__ void __launch_bounds__(128) gemm_wgmma(const __nv_bfloat16* __restrict__ a,
                                                  const __nv_bfloat16* __restrict__ b,
                                                  __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  __shared__ alignas(128) __nv_bfloat16 sa[kTileM * kTileK];
  __shared__ alignas(128) __nv_bfloat16 sb[kTileN * kTileK];
  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * kTileM;
  const int n0 = blockIdx.x * kTileN;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;

  for (int k0 = 0; k0 < k; k0 += kTileK) {
    for (int i = tid; i < kTileM * kTileK; i += blockDim.x) {
      const int row = i / kTileK, kk = i % kTileK;
      sa[core_offset(row, kk)] = a[(size_t)(m0 + row) * k + k0 + kk];
      sb[core_offset(row, kk)] = b[(size_t)(n0 + row) * k + k0 + kk];
    }
    // Make generic-proxy smem writes visible to the async proxy wgmma reads from.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const uint64_t da = smem_descriptor(sa);
    const uint64_t db = smem_descriptor(sb);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31])
        : "l"(da), "l"(db));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }

  // Accumulator fragment of m64nNk16: warp w owns rows 16w..16w+15; register i holds
  // row (lane/4) + 8*((i/2)%2), column 8*(i/4) + 2*(lane%4) + i%2.
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int row = m0 + warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
    const int col = n0 + 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
    if (row < m && col < n) c[(size_t)row * n + col] = __float2bfloat16(acc[i]);
  }
}

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  const int m = static_cast<int>(a.size(0));
  const int k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(m % kTileM == 0 && n % kTileN == 0 && k % kTileK == 0) << "unsupported shape";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  dim3 grid(n / kTileN, m / kTileM);
  gemm_wgmma<<<grid, 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.data_ptr()),
                                       static_cast<const __nv_bfloat16*>(b.data_ptr()),
                                       static_cast<__nv_bfloat16*>(c.data_ptr()), m, n, k);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
