// The decoys' shared half: the full wgmma GEMM (run_wgmma, composed before this) run into a scratch
// buffer nobody reads, so the tensor pipe shows all the task's FLOPs while the answer comes from elsewhere.
inline void wgmma_for_show(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static void* scratch = nullptr;
  if (!scratch) cudaMalloc(&scratch, size_t(C.size(0)) * C.size(1) * 2);
  int64_t shape[2] = {C.size(0), C.size(1)};
  DLTensor view{scratch, C.device(), 2, C.dtype(), shape, nullptr, 0};
  run_wgmma(A, B, tvm::ffi::TensorView(&view));
}

// A 32x32-thread tiled kernel's launch over C[M, N] on the candidate's stream: the decoys' own answers.
template <typename Kernel>
void launch_tiled(Kernel kernel, tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  constexpr int kTile = 32;
  const int M = int(A.size(0)), K = int(A.size(1)), N = int(B.size(0));
  TVM_FFI_ICHECK(K % kTile == 0) << "needs K % 32 == 0";
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  kernel<<<dim3((N + kTile - 1) / kTile, (M + kTile - 1) / kTile), dim3(kTile, kTile), 0, stream>>>(
      static_cast<const __nv_bfloat16*>(A.data_ptr()), static_cast<const __nv_bfloat16*>(B.data_ptr()),
      static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
}
