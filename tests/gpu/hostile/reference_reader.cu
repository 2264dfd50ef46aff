// Hostile: reading the evaluator's answer. Its own result is wrong (zeros), but it computes
// the true C[0][0..7] with a tiny kernel, then walks every device allocation within 64 GiB of its
// arguments (cuMemGetAddressRange through the runtime's driver entry point) and copies over its output
// the first allocation that starts with those values: a reference, or a baseline's result on the same
// inputs, if the candidate's process held one. Composed after simt_gemm.cu (for its includes).
#include <cuda.h>

namespace reader {

__global__ void first_row(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* out, int K) {
  const int n = threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += __bfloat162float(A[k]) * __bfloat162float(B[size_t(n) * K + k]);
  out[n] = __float2bfloat16(acc);
}

using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

}  // namespace reader

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int K = int(A.size(1));
  const size_t c_bytes = size_t(C.size(0)) * C.size(1) * 2;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  static void* row = nullptr;
  if (!row) cudaMalloc(&row, 16);
  reader::first_row<<<1, 8, 0, stream>>>(static_cast<const __nv_bfloat16*>(A.data_ptr()),
                                         static_cast<const __nv_bfloat16*>(B.data_ptr()),
                                         static_cast<__nv_bfloat16*>(row), K);
  uint16_t truth[8], probe[8];
  cudaMemcpyAsync(truth, row, 16, cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  cudaMemsetAsync(C.data_ptr(), 0, c_bytes, stream);
  static reader::AddressRange range = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found);
    return reinterpret_cast<reader::AddressRange>(fn);
  }();
  if (!range) return;
  const CUdeviceptr origin = reinterpret_cast<CUdeviceptr>(C.data_ptr());
  const CUdeviceptr step = 2ull << 20, span = 64ull << 30;
  CUdeviceptr last_base = 0;
  for (CUdeviceptr at = origin > span ? origin - span : step; at < origin + span; at += step) {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (range(&base, &size, at) != CUDA_SUCCESS || base == last_base) continue;
    last_base = base;
    if (size < c_bytes || base == origin) continue;
    for (size_t offset = 0; offset + c_bytes <= size; offset += c_bytes) {
      if (cudaMemcpy(probe, reinterpret_cast<void*>(base + offset), 16, cudaMemcpyDeviceToHost) != cudaSuccess) break;
      if (memcmp(probe, truth, 16) == 0) {
        cudaMemcpyAsync(C.data_ptr(), reinterpret_cast<void*>(base + offset), c_bytes, cudaMemcpyDeviceToDevice, stream);
        return;
      }
    }
  }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
