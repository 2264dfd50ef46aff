// Honest corpus (Blackwell, static tier only here): the umbrella header, TVM_FFI_THROW on shapes, and
// C[M,N] = A[M,K] @ B[N,K]^T with tcgen05.mma
// (kind::f16, bf16 in, fp32 accumulate in Tensor Memory). One CTA of 128 threads per 128x64 tile:
// the tile is staged in shared memory in the no-swizzle core-matrix layout, one thread issues the
// MMA, tcgen05.commit arrives on an mbarrier, then every warp reads its 32 TMEM lanes with
// tcgen05.ld. Written to exercise the build and SASS checks (UTCHMMA, LDTM, UTCBAR).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr int kTileM = 128;
constexpr int kTileN = 64;
constexpr int kTileK = 16;
constexpr uint32_t kTmemColumns = 64;

__device__ __forceinline__ int core_offset(int row, int k) {
  return ((row >> 3) * 2 + (k >> 3)) * 64 + (row & 7) * 8 + (k & 7);
}

__device__ __forceinline__ uint64_t smem_descriptor(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t desc = static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(128 >> 4) << 16;  // leading byte offset (along K)
  desc |= static_cast<uint64_t>(256 >> 4) << 32;  // stride byte offset (8-row groups)
  desc |= static_cast<uint64_t>(1) << 46;         // descriptor version for tcgen05
  return desc;                                    // no swizzle
}

// kind::f16 instruction descriptor: fp32 D, bf16 A and B, both K-major, N and M.
constexpr uint32_t kInstrDesc = (1u << 4) | (1u << 7) | (1u << 10) | (static_cast<uint32_t>(kTileN >> 3) << 17) |
                                (static_cast<uint32_t>(kTileM >> 4) << 24);

__global__ void __launch_bounds__(128) gemm_tcgen05(const __nv_bfloat16* __restrict__ a,
                                                    const __nv_bfloat16* __restrict__ b,
                                                    __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  __shared__ alignas(128) __nv_bfloat16 sa[kTileM * kTileK];
  __shared__ alignas(128) __nv_bfloat16 sb[kTileN * kTileK];
  __shared__ alignas(8) uint64_t bar;
  __shared__ uint32_t tmem_base;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));

  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(&tmem_base))),
                 "r"(kTmemColumns));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
  }
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_addr));
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
  const uint32_t tmem = tmem_base;

  uint32_t phase = 0;
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    for (int i = tid; i < kTileM * kTileK; i += blockDim.x) {
      const int row = i / kTileK, kk = i % kTileK;
      sa[core_offset(row, kk)] = a[(size_t)(m0 + row) * k + k0 + kk];
      if (row < kTileN) sb[core_offset(row, kk)] = b[(size_t)(n0 + row) * k + k0 + kk];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (tid == 0) {
      asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
      const uint32_t accumulate = k0 > 0 ? 1u : 0u;
      asm volatile(
          "{\n"
          ".reg .pred acc;\n"
          "setp.ne.b32 acc, %4, 0;\n"
          "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, acc;\n"
          "}\n" ::"r"(tmem),
          "l"(smem_descriptor(sa)), "l"(smem_descriptor(sb)), "r"(kInstrDesc), "r"(accumulate)
          : "memory");
      asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(bar_addr)
                   : "memory");
    }
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "wait:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait;\n"
        "}\n" ::"r"(bar_addr),
        "r"(phase)
        : "memory");
    phase ^= 1;
    asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory");
  }

  // Warp w owns TMEM lanes 32w..32w+31 (rows of the tile); read 16 columns at a time.
  const int row = m0 + warp * 32 + lane;
  for (int col0 = 0; col0 < kTileN; col0 += 16) {
    uint32_t v[16];
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, [%16];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]), "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
                 : "r"(tmem + (static_cast<uint32_t>(warp * 32) << 16) + col0));
    asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory");
    for (int j = 0; j < 16; ++j) {
      const int col = n0 + col0 + j;
      if (row < m && col < n) c[(size_t)row * n + col] = __float2bfloat16(__uint_as_float(v[j]));
    }
  }
  asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory");
  __syncthreads();
  if (warp == 0) {
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(tmem), "r"(kTmemColumns));
  }
}

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  const int m = static_cast<int>(a.size(0));
  const int k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(0));
  if (m % kTileM != 0 || n % kTileN != 0 || k % kTileK != 0) {
    TVM_FFI_THROW(ValueError) << "tcgen05 tiles are 128x64x16; got " << a.shape() << " and " << b.shape();
  }
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  gemm_tcgen05<<<dim3(n / kTileN, m / kTileM), 128, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.data_ptr()),
                                                               static_cast<const __nv_bfloat16*>(b.data_ptr()),
                                                               static_cast<__nv_bfloat16*>(c.data_ptr()), m, n, k);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
