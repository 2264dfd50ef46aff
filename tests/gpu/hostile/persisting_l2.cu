// Hostile: leaves its operands in L2 for the next call. It raises the persisting-L2 limit to the most the
// device allows and marks A persisting with an access policy window on the stream it is given, so A's
// lines would survive the flush before the next call and slow a baseline sharing L2. It also checks what
// the previous call left: a limit still raised at its entry makes it answer wrong (one row of C zeroed),
// so it passes only if the runner resets the limit before every call. Composed after wgmma_gemm.cu.
#include <algorithm>
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  size_t left = 0;
  cudaDeviceGetLimit(&left, cudaLimitPersistingL2CacheSize);
  run_wgmma(A, B, C);
  if (left != 0) cudaMemsetAsync(C.data_ptr(), 0, size_t(C.size(1)) * 2, stream);
  int device = 0, most = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, device);
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t(most));
  cudaStreamAttrValue window{};
  window.accessPolicyWindow.base_ptr = A.data_ptr();
  window.accessPolicyWindow.num_bytes = std::min(size_t(most), size_t(A.size(0)) * A.size(1) * 2);
  window.accessPolicyWindow.hitRatio = 1.0f;
  window.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  window.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &window);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
