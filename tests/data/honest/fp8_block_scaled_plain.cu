// Honest corpus: an FP8 block-scaled GEMM written plainly: <cuda_fp8.h>'s __nv_fp8_e4m3 operand types, tile
// sizes in a constexpr struct checked by static_assert, and each wgmma's partial promoted into fp32 by
// the block's scales (DeepGEMM's recipe at its finest grain) rather than chained through a K block.
// task: fp8_gemm_nt_1d2d_n4096_k7168
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/tvm_ffi.h>
#include <tvm/ffi/extra/c_env_api.h>

namespace {
struct Tile {
  static constexpr int kM = 64, kN = 64, kK = 32;  // one wgmma m64n64k32
  static constexpr int kScaleBlock = 128;          // the scales' granularity along K and along N
  static constexpr int kThreads = 128;             // one warpgroup
};
static_assert(Tile::kScaleBlock % Tile::kK == 0 && Tile::kScaleBlock % Tile::kN == 0, "tiles within a scale block");

// No-swizzle K-major core matrices: 8 rows x 16 bytes, the next along K 128 bytes on, the next 8 rows 256.
__device__ __forceinline__ int core_byte(int row, int kk) {
  return ((row >> 3) * 2 + (kk >> 4)) * 128 + (row & 7) * 16 + (kk & 15);
}

__device__ __forceinline__ uint64_t descriptor(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(128 >> 4) << 16) |
         (static_cast<uint64_t>(256 >> 4) << 32);
}

// partial = A[64x32] * B[32x64] (scale-d 0: a fresh partial each time).
__device__ __forceinline__ void wgmma_fresh(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 0, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

// The accumulator fragment: warp w holds rows 16w..16w+15; register i is row lane/4 + 8*((i/2)%2),
// column 8*(i/4) + 2*(lane%4) + i%2.
__device__ __forceinline__ int frag_row(int i) { return (threadIdx.x / 32) * 16 + (threadIdx.x % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int frag_col(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + (i % 2); }

__global__ void __launch_bounds__(Tile::kThreads) fp8_gemm(const __nv_fp8_e4m3* __restrict__ a,
                                                           const float* __restrict__ sf_a,
                                                           const __nv_fp8_e4m3* __restrict__ b,
                                                           const float* __restrict__ sf_b,
                                                           __nv_bfloat16* __restrict__ d, int m, int n, int k) {
  __shared__ alignas(128) uint8_t sa[Tile::kM * Tile::kK];
  __shared__ alignas(128) uint8_t sb[Tile::kN * Tile::kK];
  const int k_blocks = k / Tile::kScaleBlock;
  const int m0 = blockIdx.y * Tile::kM, n0 = blockIdx.x * Tile::kN;
  const uint8_t* a_bytes = reinterpret_cast<const uint8_t*>(a);
  const uint8_t* b_bytes = reinterpret_cast<const uint8_t*>(b);
  float total[32] = {};
  float partial[32];
  for (int k0 = 0; k0 < k; k0 += Tile::kK) {
    for (int i = threadIdx.x; i < Tile::kM * Tile::kK; i += Tile::kThreads) {
      const int row = i / Tile::kK, kk = i % Tile::kK;
      sa[core_byte(row, kk)] = a_bytes[static_cast<size_t>(m0 + row) * k + k0 + kk];
      sb[core_byte(row, kk)] = b_bytes[static_cast<size_t>(n0 + row) * k + k0 + kk];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    wgmma_fresh(partial, descriptor(sa), descriptor(sb));
    __syncthreads();
    const int kb = k0 / Tile::kScaleBlock;
    const float scale_b = sf_b[(n0 / Tile::kScaleBlock) * k_blocks + kb];
#pragma unroll
    for (int i = 0; i < 32; ++i) total[i] += partial[i] * (sf_a[static_cast<size_t>(m0 + frag_row(i)) * k_blocks + kb] * scale_b);
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) d[static_cast<size_t>(m0 + frag_row(i)) * n + n0 + frag_col(i)] = __float2bfloat16(total[i]);
}
}  // namespace

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView sf_a, tvm::ffi::TensorView b, tvm::ffi::TensorView sf_b,
         tvm::ffi::TensorView d) {
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1)), n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(m % Tile::kM == 0 && n % Tile::kScaleBlock == 0 && k % Tile::kScaleBlock == 0) << "unsupported shape";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  const dim3 grid(n / Tile::kN, m / Tile::kM);
  fp8_gemm<<<grid, Tile::kThreads, 0, stream>>>(
      static_cast<const __nv_fp8_e4m3*>(a.data_ptr()), static_cast<const float*>(sf_a.data_ptr()),
      static_cast<const __nv_fp8_e4m3*>(b.data_ptr()), static_cast<const float*>(sf_b.data_ptr()),
      static_cast<__nv_bfloat16*>(d.data_ptr()), m, n, k);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
