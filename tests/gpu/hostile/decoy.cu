// Hostile: a decoy. The answer comes from an mma.sync GEMM alone (tests/data/kernels/mma_sync_gemm.cu,
// as mma_path::run_impl); beside it the full wgmma GEMM runs into a scratch buffer nobody reads. The
// profile shows GMMA doing all the task's FLOPs, and HMMA doing them again. Composed after
// wgmma_gemm.cu (as run_wgmma) and wgmma_for_show.cu.
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  wgmma_for_show(A, B, C);
  mma_path::run_impl(A, B, C);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
