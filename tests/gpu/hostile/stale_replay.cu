// Hostile: right while correctness watches, then stale. After its first six calls it still runs the full
// wgmma GEMM (so its time looks honest) but into a scratch buffer, and hands back the first answer it
// ever computed. Composed after wgmma_gemm.cu (as run_wgmma).
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static int calls = 0;
  static void* first = nullptr;
  static void* scratch = nullptr;
  const size_t bytes = size_t(C.size(0)) * C.size(1) * 2;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  if (++calls <= 6 || !first) {
    run_wgmma(A, B, C);
    if (!first) {
      cudaMalloc(&first, bytes);
      cudaMalloc(&scratch, bytes);
      cudaMemcpyAsync(first, C.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream);
    }
    return;
  }
  int64_t shape[2] = {C.size(0), C.size(1)};
  DLTensor view{scratch, C.device(), 2, C.dtype(), shape, nullptr, 0};
  run_wgmma(A, B, tvm::ffi::TensorView(&view));
  cudaMemcpyAsync(C.data_ptr(), first, bytes, cudaMemcpyDeviceToDevice, stream);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
