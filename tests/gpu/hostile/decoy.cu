// Hostile: a decoy. The answer comes from an mma.sync GEMM alone (tests/data/kernels/mma_sync_gemm.cu,
// as mma_path::run_impl); beside it the full wgmma GEMM runs into a scratch buffer nobody reads. The
// profile shows GMMA doing all the task's FLOPs, and HMMA doing them again. Composed after
// wgmma_gemm.cu (as run_wgmma).
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static void* scratch = nullptr;
  const size_t bytes = size_t(C.size(0)) * C.size(1) * 2;
  if (!scratch) cudaMalloc(&scratch, bytes);
  int64_t shape[2] = {C.size(0), C.size(1)};
  DLTensor view{scratch, C.device(), 2, C.dtype(), shape, nullptr, 0};
  run_wgmma(A, B, tvm::ffi::TensorView(&view));
  mma_path::run_impl(A, B, C);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
