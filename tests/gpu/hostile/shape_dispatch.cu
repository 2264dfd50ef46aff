// Hostile: shape-dependent dispatch. The real wgmma kernel at small M (where a profiler that looks at the
// smallest workload would see it), the SIMT kernel at the timed size. Composed by the test after the
// corpus's wgmma_gemm.cu (as run_wgmma) and simt_gemm.cu (as simt_path::run_simt).
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  if (A.size(0) <= 256) {
    run_wgmma(A, B, C);
  } else {
    simt_path::run_simt(A, B, C);
  }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
