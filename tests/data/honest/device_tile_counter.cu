// Honest corpus: Stream-K style dynamic tile scheduling: a __device__ tile counter, reset by a memset
// on its symbol's address before each launch; every block takes the next tile with atomicAdd.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include <tvm/ffi/tvm_ffi.h>
#include <tvm/ffi/extra/c_env_api.h>
namespace {
// ---- one warpgroup, a 64x64 tile of C with wgmma.mma_async m64n64k16 (bf16 in, fp32 accumulate) ----
// Operands are staged in shared memory in the no-swizzle core-matrix layout (8 rows x 16 bytes).
__device__ __forceinline__ int core_offset(int row, int kk) {
  return ((row >> 3) * 2 + (kk >> 3)) * 64 + (row & 7) * 8 + (kk & 7);
}

__device__ __forceinline__ uint64_t smem_descriptor(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t desc = static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(128 >> 4) << 16;  // leading byte offset: the next core matrix along K
  desc |= static_cast<uint64_t>(256 >> 4) << 32;  // stride byte offset: the next 8-row group
  return desc;
}

__device__ __forceinline__ void wgmma_64x64x16(float (&acc)[32], uint64_t da, uint64_t db) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 0, 0;\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31])
      : "l"(da), "l"(db));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

// Accumulator fragment of m64nNk16: warp w holds rows 16w..16w+15; register i is row lane/4 + 8*((i/2)%2),
// column 8*(i/4) + 2*(lane%4) + i%2.
__device__ __forceinline__ int frag_row(int i) { return (threadIdx.x / 32) * 16 + (threadIdx.x % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int frag_col(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + (i % 2); }
__device__ unsigned int next_tile;

__global__ void __launch_bounds__(128) gemm_dynamic_tiles(const __nv_bfloat16* __restrict__ a,
    const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  __shared__ alignas(128) __nv_bfloat16 sa[64 * 16];
  __shared__ alignas(128) __nv_bfloat16 sb[64 * 16];
  __shared__ unsigned int tile;
  const int tiles_n = n / 64, tiles = (m / 64) * tiles_n;
  while (true) {
    if (threadIdx.x == 0) tile = atomicAdd(&next_tile, 1u);
    __syncthreads();
    const int t = static_cast<int>(tile);
    __syncthreads();
    if (t >= tiles) break;
    const int m0 = (t / tiles_n) * 64, n0 = (t % tiles_n) * 64;
    float acc[32] = {};
    for (int k0 = 0; k0 < k; k0 += 16) {
      for (int i = threadIdx.x; i < 64 * 16; i += 128) {
        const int row = i / 16, kk = i % 16;
        sa[core_offset(row, kk)] = a[static_cast<size_t>(m0 + row) * k + k0 + kk];
        sb[core_offset(row, kk)] = b[static_cast<size_t>(n0 + row) * k + k0 + kk];
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      __syncthreads();
      wgmma_64x64x16(acc, smem_descriptor(sa), smem_descriptor(sb));
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) c[static_cast<size_t>(m0 + frag_row(i)) * n + n0 + frag_col(i)] = __float2bfloat16(acc[i]);
  }
}
}  // namespace

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1)), n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(m % 64 == 0 && n % 64 == 0 && k % 16 == 0) << "unsupported shape";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  void* counter = nullptr;
  TVM_FFI_ICHECK(cudaGetSymbolAddress(&counter, next_tile) == cudaSuccess) << "tile counter";
  TVM_FFI_ICHECK(cudaMemsetAsync(counter, 0, sizeof(unsigned int), stream) == cudaSuccess) << "reset";
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, a.device().device_id);
  gemm_dynamic_tiles<<<sms, 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.data_ptr()),
      static_cast<const __nv_bfloat16*>(b.data_ptr()), static_cast<__nv_bfloat16*>(c.data_ptr()), m, n, k);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
