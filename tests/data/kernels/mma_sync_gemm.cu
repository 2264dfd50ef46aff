// Static-evaluation test kernel: C[M,N] = A[M,K] @ B[N,K]^T with the pre-Hopper warp-level
// mma.sync.m16n8k16 (bf16 in, fp32 accumulate). Its SASS holds HMMA, not GMMA: on Hopper it must be
// reported as missing the required family. One warp computes one 16x8 tile; M, N, K multiples of 16, 8, 16.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

__device__ __forceinline__ uint32_t pack(const __nv_bfloat16* p) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(p[0])) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(p[1])) << 16);
}

__global__ void gemm_mma_sync(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                              __nv_bfloat16* __restrict__ c, int m, int n, int k) {
  const int lane = threadIdx.x % 32;
  const int group = lane / 4, pair = lane % 4;
  const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < k; k0 += 16) {
    // Fragment layouts of m16n8k16 (PTX ISA): A rows group and group+8, B column group.
    const __nv_bfloat16* a_lo = a + (size_t)(m0 + group) * k + k0 + 2 * pair;
    const __nv_bfloat16* a_hi = a_lo + (size_t)8 * k;
    const __nv_bfloat16* b_col = b + (size_t)(n0 + group) * k + k0 + 2 * pair;
    const uint32_t a0 = pack(a_lo), a1 = pack(a_hi), a2 = pack(a_lo + 8), a3 = pack(a_hi + 8);
    const uint32_t b0 = pack(b_col), b1 = pack(b_col + 8);
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  const int row = m0 + group, col = n0 + 2 * pair;
  c[(size_t)row * n + col] = __float2bfloat16(d[0]);
  c[(size_t)row * n + col + 1] = __float2bfloat16(d[1]);
  c[(size_t)(row + 8) * n + col] = __float2bfloat16(d[2]);
  c[(size_t)(row + 8) * n + col + 1] = __float2bfloat16(d[3]);
}

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  const int m = static_cast<int>(a.size(0));
  const int k = static_cast<int>(a.size(1));
  const int n = static_cast<int>(b.size(0));
  TVM_FFI_ICHECK(m % 16 == 0 && n % 8 == 0 && k % 16 == 0) << "unsupported shape";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  gemm_mma_sync<<<dim3(n / 8, m / 16), 32, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.data_ptr()),
                                                         static_cast<const __nv_bfloat16*>(b.data_ptr()),
                                                         static_cast<__nv_bfloat16*>(c.data_ptr()), m, n, k);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
