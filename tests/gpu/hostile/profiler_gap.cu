// Hostile: tells the profiled call apart from the GPU side. Each call first launches a one-thread kernel
// that stamps %globaltimer; the GEMM's blocks read how long ago that was. Between the timed calls'
// back-to-back launches the gap is microseconds; under Nsight Compute, which serialises and replays every
// kernel, it is far longer. On a long gap a block runs a wgmma path, otherwise an mma.sync path of the same
// kernel (same grid, block, registers and shared memory, the same kernels launched). Each block then holds
// its SM until a fixed time has passed since it began, the mma.sync path's 9 % shorter: the kernel times
// of the two paths differ as much as a cheaper path might gain, and the output is right on both. Built
// with MMA_BLOCK_NS=6000000 both paths take the same time: only the timed calls' own counters tell.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int kTile = 64;
constexpr int kTileK = 16;
constexpr uint64_t kProfiledGapNs = 2000000;  // 2 ms: no timed call waits this long between its kernels
constexpr uint64_t kWgmmaBlockNs = 6000000;   // each block's time on the wgmma path ...
#ifndef MMA_BLOCK_NS
#define MMA_BLOCK_NS 5460000
#endif
constexpr uint64_t kMmaBlockNs = MMA_BLOCK_NS;  // ... and on the mma.sync path, 9 % less (or as long)

__device__ uint64_t g_stamp;

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stamp_kernel() { g_stamp = globaltimer(); }

__device__ __forceinline__ int core_offset(int row, int k) {
  return ((row >> 3) * 2 + (k >> 3)) * 64 + (row & 7) * 8 + (k & 7);
}

__device__ __forceinline__ uint64_t smem_descriptor(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(128 >> 4) << 16;
  desc |= static_cast<uint64_t>(256 >> 4) << 32;
  return desc;
}

__device__ __forceinline__ uint32_t pack(const __nv_bfloat16* p) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(p[0])) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(p[1])) << 16);
}

__device__ void wgmma_tile(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n, int k,
                           int m0, int n0, __nv_bfloat16* sa, __nv_bfloat16* sb) {
  const int tid = threadIdx.x;
  float acc[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    for (int i = tid; i < kTile * kTileK; i += blockDim.x) {
      const int row = i / kTileK, kk = i % kTileK;
      sa[core_offset(row, kk)] = a[(size_t)(m0 + row) * k + k0 + kk];
      sb[core_offset(row, kk)] = b[(size_t)(n0 + row) * k + k0 + kk];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const uint64_t da = smem_descriptor(sa);
    const uint64_t db = smem_descriptor(sb);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
        "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, 0, 0;\n"
        "}\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]),
          "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]), "+f"(acc[13]),
          "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]), "+f"(acc[19]),
          "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]), "+f"(acc[25]),
          "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]), "+f"(acc[31])
        : "l"(da), "l"(db));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();
  }
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int row = m0 + warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
    const int col = n0 + 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
    c[(size_t)row * n + col] = __float2bfloat16(acc[i]);
  }
}

// The same 64x64 tile with mma.sync m16n8k16: warp w owns rows 16w..16w+15, eight 8-column fragments.
__device__ void mma_tile(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n, int k, int m0,
                         int n0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, pair = lane % 4;
  const int row0 = m0 + warp * 16;
  float d[8][4];
#pragma unroll
  for (int f = 0; f < 8; ++f) d[f][0] = d[f][1] = d[f][2] = d[f][3] = 0.f;
  for (int k0 = 0; k0 < k; k0 += 16) {
    const __nv_bfloat16* a_lo = a + (size_t)(row0 + group) * k + k0 + 2 * pair;
    const __nv_bfloat16* a_hi = a_lo + (size_t)8 * k;
    const uint32_t a0 = pack(a_lo), a1 = pack(a_hi), a2 = pack(a_lo + 8), a3 = pack(a_hi + 8);
#pragma unroll
    for (int f = 0; f < 8; ++f) {
      const __nv_bfloat16* b_col = b + (size_t)(n0 + 8 * f + group) * k + k0 + 2 * pair;
      const uint32_t b0 = pack(b_col), b1 = pack(b_col + 8);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
          "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(d[f][0]), "+f"(d[f][1]), "+f"(d[f][2]), "+f"(d[f][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
#pragma unroll
  for (int f = 0; f < 8; ++f) {
    const int row = row0 + group, col = n0 + 8 * f + 2 * pair;
    c[(size_t)row * n + col] = __float2bfloat16(d[f][0]);
    c[(size_t)row * n + col + 1] = __float2bfloat16(d[f][1]);
    c[(size_t)(row + 8) * n + col] = __float2bfloat16(d[f][2]);
    c[(size_t)(row + 8) * n + col + 1] = __float2bfloat16(d[f][3]);
  }
}

__global__ void __launch_bounds__(128) gemm_two_paths(const __nv_bfloat16* __restrict__ a,
                                                      const __nv_bfloat16* __restrict__ b,
                                                      __nv_bfloat16* __restrict__ c, int n, int k) {
  __shared__ alignas(128) __nv_bfloat16 sa[kTile * kTileK];
  __shared__ alignas(128) __nv_bfloat16 sb[kTile * kTileK];
  __shared__ int profiled;
  const uint64_t began = globaltimer();
  if (threadIdx.x == 0) profiled = began - *(volatile uint64_t*)&g_stamp > kProfiledGapNs;
  __syncthreads();
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  if (profiled) {
    wgmma_tile(a, b, c, n, k, m0, n0, sa, sb);
  } else {
    mma_tile(a, b, c, n, k, m0, n0);
  }
  if (threadIdx.x == 0) {
    const uint64_t hold = profiled ? kWgmmaBlockNs : kMmaBlockNs;
    while (globaltimer() - began < hold) {
    }
  }
  __syncthreads();
}

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  const int m = static_cast<int>(a.size(0));
  const int k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(m % kTile == 0 && n % kTile == 0 && k % kTileK == 0) << "unsupported shape";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  stamp_kernel<<<1, 1, 0, stream>>>();
  gemm_two_paths<<<dim3(n / kTile, m / kTile), 128, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(a.data_ptr()), static_cast<const __nv_bfloat16*>(b.data_ptr()),
      static_cast<__nv_bfloat16*>(c.data_ptr()), n, k);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
