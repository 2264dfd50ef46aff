// Hostile: a silent out-of-bounds write. A correct SIMT GEMM whose last thread also writes one element
// past the end of C: inside the caching allocator's segment it crashes nothing and the result is right;
// only memcheck (each tensor its own allocation) sees it. Composed after simt_gemm.cu.
namespace stray {
__global__ void past_the_end(__nv_bfloat16* c, size_t n) { c[n] = __float2bfloat16(1.f); }
}  // namespace stray

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  simt_path::run_simt(A, B, C);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  stray::past_the_end<<<1, 1, 0, stream>>>(static_cast<__nv_bfloat16*>(C.data_ptr()), size_t(C.size(0)) * C.size(1));
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
