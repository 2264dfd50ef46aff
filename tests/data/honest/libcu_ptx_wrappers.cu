// Honest corpus: libcu++'s PTX wrappers (cuda::ptx) for the TMA loads and the mbarrier instead of inline
// asm, TVM-FFI's umbrella header, CCCL's cuda::std types; wgmma on 128-byte swizzled tiles.
#include <cuda/ptx>
#include <cuda/std/cstdint>
#include <tvm/ffi/tvm_ffi.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
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

// acc += A[m0:m0+64, k_begin:k_end] @ B[n0:n0+64, k_begin:k_end]^T, by the block's first 128 threads.
__device__ __forceinline__ void tile_mma(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                                         int k, int m0, int n0, int k_begin, int k_end, __nv_bfloat16* sa,
                                         __nv_bfloat16* sb, float (&acc)[32]) {
  for (int k0 = k_begin; k0 < k_end; k0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 128) {
      const int row = i / 16, kk = i % 16;
      sa[core_offset(row, kk)] = a[static_cast<size_t>(m0 + row) * k + k0 + kk];
      sb[core_offset(row, kk)] = b[static_cast<size_t>(n0 + row) * k + k0 + kk];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> async-proxy reads
    __syncthreads();
    wgmma_64x64x16(acc, smem_descriptor(sa), smem_descriptor(sb));
    __syncthreads();
  }
}

// Accumulator fragment of m64nNk16: warp w holds rows 16w..16w+15; register i is row lane/4 + 8*((i/2)%2),
// column 8*(i/4) + 2*(lane%4) + i%2.
__device__ __forceinline__ int frag_row(int i) { return (threadIdx.x / 32) * 16 + (threadIdx.x % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int frag_col(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + (i % 2); }
// ---- TMA: a 64x64 bf16 box (128 bytes wide) lands in shared memory 128-byte swizzled, signalling an mbarrier ----
constexpr int BK = 64;
constexpr uint32_t TILE_BYTES = 64 * BK * 2;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(16 >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
  const cuda::std::int32_t coords[2] = {x, y};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

__global__ void __launch_bounds__(128) gemm_tma(const __grid_constant__ CUtensorMap map_a,
                                                const __grid_constant__ CUtensorMap map_b,
                                                __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  __shared__ alignas(128) uint8_t raw[2 * TILE_BYTES + 1024];
  __shared__ alignas(8) uint64_t bar_storage;
  const uint32_t base = smem_u32(raw);
  uint8_t* tile_a = raw + ((1024 - (base & 1023)) & 1023);  // the 128-byte swizzle wants 1 KB alignment
  uint8_t* tile_b = tile_a + TILE_BYTES;
  const uint32_t sa = smem_u32(tile_a), sb = smem_u32(tile_b);
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(&bar_storage, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  float acc[32] = {};
  int phase = 0;
  for (int k0 = 0; k0 < k; k0 += BK, phase ^= 1) {
    if (threadIdx.x == 0) {
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &bar_storage, 2 * TILE_BYTES);
      tma_load(tile_a, &map_a, k0, m0, &bar_storage);
      tma_load(tile_b, &map_b, k0, n0, &bar_storage);
    }
    while (!cuda::ptx::mbarrier_try_wait_parity(&bar_storage, static_cast<uint32_t>(phase))) {
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) wgmma_64x64x16(acc, desc_sw128(sa + kk * 32), desc_sw128(sb + kk * 32));
    __syncthreads();  // every warp is done with the tile before the next load overwrites it
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) c[static_cast<size_t>(m0 + frag_row(i)) * n + n0 + frag_col(i)] = __float2bfloat16(acc[i]);
}
// A row-major [rows, cols] bf16 matrix as a 2-D tensor map with a 64x64 box, 128-byte swizzled.
CUtensorMap make_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* base, uint64_t rows, uint64_t cols) {
  CUtensorMap map;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {cols * 2};
  cuuint32_t box[2] = {BK, 64};
  cuuint32_t element_strides[2] = {1, 1};
  CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_ICHECK(r == CUDA_SUCCESS) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(r);
  return map;
}

void launch(PFN_cuTensorMapEncodeTiled_v12000 encode, tvm::ffi::TensorView a, tvm::ffi::TensorView b,
            tvm::ffi::TensorView c) {
  const int m = static_cast<int>(a.size(0)), k = static_cast<int>(a.size(1)), n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(m % 64 == 0 && n % 64 == 0 && k % BK == 0) << "unsupported shape";
  const CUtensorMap map_a = make_map(encode, a.data_ptr(), m, k);
  const CUtensorMap map_b = make_map(encode, b.data_ptr(), n, k);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  gemm_tma<<<dim3(n / 64, m / 64), 128, 0, stream>>>(map_a, map_b, static_cast<__nv_bfloat16*>(c.data_ptr()), m, n, k);
}
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (fn == nullptr) {
    cudaDriverEntryPointQueryResult status;
    cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn),
                                              cudaEnableDefault, &status);
    TVM_FFI_ICHECK(err == cudaSuccess && status == cudaDriverEntryPointSuccess) << "no cuTensorMapEncodeTiled";
  }
  return fn;
}
}  // namespace

void run(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) { launch(encoder(), a, b, c); }

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
