// Fault: honest for its first eight calls (correctness and the start of the warm-up), then every call stores
// far outside C once it has computed it. The timed call's wait must report the illegal address as the
// fault it is, not spin on a copy that never lands until the call's limit. Composed after wgmma_gemm.cu (as
// run_wgmma).
__global__ void stray_store(__nv_bfloat16* c) { c[size_t(1) << 40] = __float2bfloat16(1.f); }

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static int calls = 0;
  run_wgmma(A, B, C);
  if (++calls > 8) {
    auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
    stray_store<<<1, 1, 0, stream>>>(static_cast<__nv_bfloat16*>(C.data_ptr()));
  }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
